// Differentiable embedding lookup (gather forward, scatter-add backward).
#pragma once

#include "braid/core/tensor.h"

namespace braid {

// weight [V, C], ids i32 [...] -> [..., C]. An id outside [0, V) is an error naming it.
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace braid
