// Differentiable layer normalisation over the last dimension.
#pragma once

#include "braid/core/tensor.h"

namespace braid {

// (x - mean) / sqrt(var + eps) * weight + bias over x's last dim (weight, bias: [C]).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

}  // namespace braid
