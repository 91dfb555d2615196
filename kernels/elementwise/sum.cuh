// CUDA full reduction: sum and sum of squares of a tensor, accumulated in double.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// Writes sum(x) and sum(x^2) (either pointer may be null) for a dense f32 x. Two stages with a
// split that depends only on x's size, so the result is the same on every run and every GPU;
// it differs from the CPU's (thread-count dependent) order only by double rounding. Blocks the
// host until the two values have arrived.
void sum(const Tensor& x, double* sum, double* sum_squares);

}  // namespace braid::cuda
