// Differentiable reductions to a scalar, and the sum of squares used by gradient clipping.
#pragma once

#include "braid/core/tensor.h"

namespace braid {

Tensor sum(const Tensor& x);   // scalar (shape [])
Tensor mean(const Tensor& x);  // scalar (shape [])
// Sums x over the dims that were broadcast to reach x's shape from `shape` (no history).
Tensor sum_to_shape(const Tensor& x, const Shape& shape);
// sum(x^2) without history (global gradient norms): float partial sums over blocks of 256
// elements, added in double, so the error does not grow with the tensor size.
double sum_of_squares(const Tensor& x);

}  // namespace braid
