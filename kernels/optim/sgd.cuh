// CUDA SGD with momentum and (coupled) weight decay, bitwise identical to the CPU kernel.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// d = grad * grad_scale + weight_decay * param; with momentum, buf = first_step ? d :
// momentum * buf + d and d = buf; then param -= lr * d. momentum_buf may be undefined when
// momentum == 0. Explicitly rounded intrinsics in the CPU kernel's order.
void sgd(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
         float weight_decay, float grad_scale, bool first_step);

}  // namespace braid::cuda
