// Global gradient-norm clipping: the norm on the CPU (or on one device) and its coefficient.
#include "braid/optim/clip.h"

#include <cmath>

#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid::optim {

ClipResult clip_coefficient(const std::vector<Tensor>& params, float max_norm,
                            const ReadyGradSquares* ready) {
  double squares = 0;
  for (const Tensor& p : params)
    if (p.grad().defined()) squares += grad_sum_of_squares(p, ready);
  return clip_for_norm(std::sqrt(squares), max_norm);
}

ClipResult clip_for_norm(double norm, float max_norm) {
  float scale = 1.0f;
  // The same rule as torch.nn.utils.clip_grad_norm_: scale = max_norm / (norm + 1e-6), capped at 1.
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
    if (coef < 1.0) scale = static_cast<float>(coef);
  }
  return {norm, scale};
}

ClipResult clip_on_device(const std::vector<Tensor>& grads, float max_norm) {
  BRAID_CHECK(!grads.empty(), "clip_on_device needs at least one gradient");
  const Device device = grads.front().device();
  BRAID_CHECK(!device.is_cpu(),
              "clip_on_device is for device gradients; the CPU uses clip_for_norm");
  std::vector<Tensor> dense;
  dense.reserve(grads.size());
  for (const Tensor& g : grads) {
    BRAID_CHECK(g.device() == device && g.dtype() == DType::f32,
                "clip_on_device: gradient {} on {} is not f32 on {}", g.str(), g.device().str(),
                device.str());
    dense.push_back(g.contiguous());
  }
  ClipResult out{std::nan(""), 1.0f, Tensor::empty({2}, DType::f32, device)};
  ops::kernel<ops::GradNormKernel>(device)(dense, max_norm, out.device);
  return out;
}

}  // namespace braid::optim
