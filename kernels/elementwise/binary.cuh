// CUDA binary elementwise op (add, sub, mul, div) over broadcast strided views.
#pragma once

#include "braid/ops/kernel_signatures.h"

namespace braid::cuda {

// out = a (op) b. a and b are already broadcast to out's shape (stride-0 dims allowed); any
// strides work as long as at most kMaxDims dims remain after merging. out may alias a or b
// element for element (in-place add_). Bitwise equal to the CPU kernel: one IEEE operation.
void binary(ops::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);

}  // namespace braid::cuda
