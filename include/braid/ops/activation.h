// Differentiable activations: GELU (tanh approximation, as GPT-2) and softmax over the last dim.
#pragma once

#include "braid/core/tensor.h"

namespace braid {

Tensor gelu(const Tensor& x);
Tensor softmax(const Tensor& x);

}  // namespace braid
