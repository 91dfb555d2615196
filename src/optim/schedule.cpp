// Warmup + cosine learning-rate schedule and the global gradient-norm clip coefficient.
#include "braid/optim/schedule.h"

#include <cmath>

namespace braid::optim {

float LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps)
    return max_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  if (kind == "constant") return max_lr;
  BRAID_CHECK(kind == "cosine", "unknown lr schedule '{}' (expected cosine or constant)", kind);
  const int64_t decay_steps = std::max<int64_t>(total_steps - warmup_steps, 1);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return static_cast<float>(min_lr + (max_lr - min_lr) * cosine);
}

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

}  // namespace braid::optim
