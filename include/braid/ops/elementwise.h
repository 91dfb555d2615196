// Differentiable elementwise arithmetic with NumPy broadcasting, and in-place helpers.
#pragma once

#include "braid/core/tensor.h"

namespace braid {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float alpha);  // alpha * x

// a += b in place without recording history (gradient accumulation, optimizer math).
void add_(Tensor& a, const Tensor& b);
// x *= alpha in place without recording history.
void scale_(Tensor& x, float alpha);

// The shape a and b broadcast to (NumPy rules), or an error naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace braid
