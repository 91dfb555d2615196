// CUDA softmax over the last dim (a row normalisation, hence the norm family).
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// y = softmax(x) row by row over the last dim; x and y dense f32 of one shape. One block per
// row with warp-shuffle reductions; expf instead of the CPU's polynomial exp (~2 ulp apart).
void softmax_forward(const Tensor& x, Tensor& y);
// dx = y * (dy - sum(y * dy)) row by row.
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

}  // namespace braid::cuda
