// CUDA sum_to: reduce a tensor over the dims along which `out` was broadcast to it.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// out[j] += sum of x over the elements that broadcast onto j (out's shape broadcasts to x's;
// out is accumulated into, like the CPU kernel, and the op layer passes it zeroed). Sums run in
// double over a row split that depends only on the shapes, with no atomics: reproducible.
// Fast path when out is x's trailing block (bias and position gradients); any other broadcast
// pattern with at most kMaxDims merged kept and reduced dims takes a general strided path.
void sum_to(const Tensor& x, Tensor& out);

}  // namespace braid::cuda
