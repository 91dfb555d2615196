// StepTrace: the trace_steps window of a run, each rank's trace file and the merged one.
#include "braid/train/step_trace.h"

#include <charconv>
#include <filesystem>

#include "braid/core/error.h"
#include "braid/core/logging.h"
#include "braid/core/trace.h"

namespace braid::train {

namespace {

std::optional<int64_t> parse_step(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::string rank_file(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / ("trace_rank_" + std::to_string(rank) + ".json")).string();
}

}  // namespace

std::optional<TraceSteps> parse_trace_steps(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const size_t colon = text.find(':');
  std::optional<int64_t> first, last;
  if (colon != std::string::npos) {
    first = parse_step(std::string_view(text).substr(0, colon));
    last = parse_step(std::string_view(text).substr(colon + 1));
  }
  BRAID_CHECK(first && last && *first >= 1 && *first <= *last,
              "training.trace_steps \"{}\" is not \"A:B\" with 1 <= A <= B (the first and last "
              "step to trace, 1-based, inclusive; e.g. \"2:3\")",
              text);
  return TraceSteps{*first, *last};
}

StepTrace::StepTrace(std::optional<TraceSteps> steps, std::string run_dir,
                     const dist::ParallelGrid& grid, dist::ProcessGroupPtr control)
    : steps_(steps), run_dir_(std::move(run_dir)), grid_(grid), control_(std::move(control)) {
  BRAID_CHECK(!steps_ || !run_dir_.empty(),
              "training.trace_steps needs training.run_dir: the folder the traces go to");
}

void StepTrace::before_step(int64_t step) {
  // A run resumed inside the window traces what is left of it.
  if (!steps_ || recording_ || step < steps_->first || step > steps_->last) return;
  std::filesystem::create_directories(run_dir_);
  // Every rank leaves the barrier at about the same moment: a common time origin.
  if (control_) control_->barrier()->wait();
  const int rank = grid_.world()->rank();
  trace::start(rank, fmt::format("rank {} ({})", rank, grid_.describe()));
  trace::name_this_thread("compute");
  recording_ = true;
}

void StepTrace::after_step(int64_t step) {
  if (!recording_ || step < steps_->last) return;
  trace::stop();
  recording_ = false;
  const int rank = grid_.world()->rank();
  trace::write(rank_file(run_dir_, rank));
  if (control_) control_->barrier()->wait();  // every rank's file is complete
  if (rank != 0) return;
  std::vector<std::string> files;
  for (int r = 0; r < grid_.world()->size(); ++r) files.push_back(rank_file(run_dir_, r));
  const std::string merged = (std::filesystem::path(run_dir_) / "trace.json").string();
  trace::merge(files, merged);
  log().info("trace of steps {} to {} written to {} (open it in ui.perfetto.dev)", steps_->first,
             steps_->last, merged);
}

}  // namespace braid::train
