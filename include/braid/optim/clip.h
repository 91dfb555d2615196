// Global gradient-norm clipping: the norm of all gradients and the coefficient that scales them.
#pragma once

#include <vector>

#include "braid/core/tensor.h"
#include "braid/optim/ready_grad_squares.h"

namespace braid::optim {

struct ClipResult {
  double norm;  // global L2 norm of all gradients before clipping
  float scale;  // multiply gradients by this (1 when the norm is within max_norm)
  // Gradients on a device: {norm, scale} there (f32[2]), not read back; `norm` is then NaN and
  // `scale` 1 (the update reads the scale from the device, Optimizer::set_device_step).
  Tensor device{};
};

// Global L2 norm of the gradients (undefined gradients count as zero) and the clipping
// coefficient for max_norm (<= 0: no clipping). Does not modify the gradients. A parameter
// whose squares `ready` recorded is not read again.
ClipResult clip_coefficient(const std::vector<Tensor>& params, float max_norm,
                            const ReadyGradSquares* ready = nullptr);
// The clipping coefficient for a norm computed elsewhere (e.g. over a parallel grid).
ClipResult clip_for_norm(double norm, float max_norm);
// The norm and clipping coefficient of `grads` (one device's, not the CPU) computed there in
// one GradNormKernel call, nothing read back (ClipResult::device).
ClipResult clip_on_device(const std::vector<Tensor>& grads, float max_norm);

}  // namespace braid::optim
