// StepTrace: records training.trace_steps A:B of this rank into run_dir/trace_rank_<r>.json and
// merges the ranks into run_dir/trace.json at the end of step B (docs/tracing.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "braid/dist/parallel_grid.h"

namespace braid::train {

// Steps first..last (1-based, inclusive) of training.trace_steps.
struct TraceSteps {
  int64_t first = 0, last = 0;
};

// Parses "A:B" with 1 <= A <= B; nullopt for "" (no trace). A malformed value is an error naming
// the expected form.
std::optional<TraceSteps> parse_trace_steps(const std::string& text);

class StepTrace {
 public:
  // `steps` from training.trace_steps, `run_dir` where the files go (created if missing).
  // `control` (null on one rank) is a group of the whole world apart from training's
  // collectives: it aligns the ranks' time origins and orders the merge after every write.
  StepTrace(std::optional<TraceSteps> steps, std::string run_dir, const dist::ParallelGrid& grid,
            dist::ProcessGroupPtr control);

  // Before step `step` (1-based): starts recording at the first traced step (collective over
  // `control` then).
  void before_step(int64_t step);
  // After step `step`: at the last traced step stops, writes this rank's file and, on world rank
  // 0 once every rank wrote, the merged trace (collective over `control` then).
  void after_step(int64_t step);
  bool recording() const { return recording_; }

 private:
  std::optional<TraceSteps> steps_;
  std::string run_dir_;
  const dist::ParallelGrid& grid_;
  dist::ProcessGroupPtr control_;
  bool recording_ = false;
};

}  // namespace braid::train
