// CUDA GELU (tanh approximation) forward and backward.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for dense f32 x and y (may alias).
// Uses CUDA's tanhf; the CPU kernel uses an exp-based polynomial tanh (fast_tanh, ~1e-7
// absolute error), so the two agree to about 1e-6, not bitwise.
void gelu_forward(const Tensor& x, Tensor& y);
// dx = dy * dGELU/dx at x, same formula and operation order as the CPU kernel.
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);

}  // namespace braid::cuda
