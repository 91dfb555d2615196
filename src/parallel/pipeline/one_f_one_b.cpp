// 1F1B (PipeDream-Flush): a warm-up of forwards, then one forward per backward, then the
// remaining backwards; stage s keeps at most stages - s micro-batches' activations.
#include "braid/core/error.h"
#include "braid/parallel/pipeline/schedule.h"

namespace braid::parallel::pipeline {

ComputeOrder one_f_one_b(const ScheduleShape& shape) {
  BRAID_CHECK(shape.chunks == 1,
              "1f1b runs one model chunk per stage; with {} virtual chunks use interleaved_1f1b",
              shape.chunks);
  const int p = shape.stages, m = shape.microbatches;
  ComputeOrder order(p);
  for (int s = 0; s < p; ++s) {
    const int warmup = std::min(p - s - 1, m);
    int next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward)
      order[s].push_back({ActionKind::forward, next_forward, 0});
    while (next_forward < m) {
      order[s].push_back({ActionKind::forward, next_forward++, 0});
      order[s].push_back({ActionKind::backward, next_backward++, 0});
    }
    while (next_backward < m) order[s].push_back({ActionKind::backward, next_backward++, 0});
  }
  return order;
}

}  // namespace braid::parallel::pipeline
