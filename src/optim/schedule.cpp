// Warmup + cosine learning-rate schedule.
#include "braid/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "braid/core/error.h"

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

}  // namespace braid::optim
