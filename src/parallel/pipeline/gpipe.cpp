// GPipe: every micro-batch forward, then every backward (peak activations: all micro-batches).
#include "braid/core/error.h"
#include "braid/parallel/pipeline/schedule.h"

namespace braid::parallel::pipeline {

ComputeOrder gpipe(const ScheduleShape& shape) {
  ComputeOrder order(shape.stages);
  for (int s = 0; s < shape.stages; ++s) {
    for (int c = 0; c < shape.chunks; ++c)
      for (int mb = 0; mb < shape.microbatches; ++mb)
        order[s].push_back({ActionKind::forward, mb, c});
    for (int c = shape.chunks - 1; c >= 0; --c)
      for (int mb = 0; mb < shape.microbatches; ++mb)
        order[s].push_back({ActionKind::backward, mb, c});
  }
  return order;
}

}  // namespace braid::parallel::pipeline
