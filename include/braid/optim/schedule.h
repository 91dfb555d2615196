// Learning-rate schedules: linear warmup, then cosine decay or a constant rate.
#pragma once

#include <cstdint>
#include <string>

namespace braid::optim {

struct LrSchedule {
  float max_lr = 1e-3f;
  float min_lr = 0.0f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  std::string kind = "cosine";  // "cosine" or "constant"

  // Learning rate at 0-based `step`: linear warmup to max_lr over warmup_steps, then cosine
  // decay to min_lr at total_steps (or constant max_lr).
  float at(int64_t step) const;
};

}  // namespace braid::optim
