// Rank 0's record of a run in training.run_dir: metrics.jsonl (one JSON object per logged step)
// and a TensorBoard event file with the same values (docs/metrics.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "braid/train/metrics.h"

namespace braid::train {

class TensorBoardWriter;

class MetricsFile {
 public:
  // Opens <run_dir>/metrics.jsonl for appending and a new event file beside it, creating the
  // folder. A run that starts from step `first_step` (a resumed checkpoint's, else 0) first
  // drops what it will write again: the lines and events of steps after first_step (and at
  // first_step 0, step 0's validation), and a last line or record a crash cut short.
  // `val_due(step)` says whether a validation loss of `step` (steps done) is still to come:
  // that step's line waits for it so the loss lands on the line.
  MetricsFile(const std::string& run_dir, int64_t first_step, std::function<bool(int64_t)> val_due);
  ~MetricsFile();  // close()
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // A logged step's metrics, in step order (on a device, when its readback arrives).
  void add_step(const StepMetrics& m);
  // The validation loss after `step` steps. One an earlier run's kept events already hold (a
  // run resumed at its last step validates the same weights again) is not repeated there.
  void add_val(int64_t step, float loss);
  // Writes a line still waiting for its validation (a run stopped before it) and closes.
  void close();

  const std::string& jsonl_path() const { return jsonl_path_; }
  const std::string& event_path() const { return event_path_; }

 private:
  void write_line(const StepMetrics& m, std::optional<float> val);

  std::string jsonl_path_, event_path_;
  std::FILE* jsonl_ = nullptr;
  std::unique_ptr<TensorBoardWriter> events_;
  std::function<bool(int64_t)> val_due_;
  std::optional<StepMetrics> pending_;   // a logged step waiting for its validation loss
  std::map<int64_t, float> val_losses_;  // validations whose step's line has not come yet
  std::set<int64_t> kept_val_steps_;     // steps whose val/loss an earlier run's events hold
};

}  // namespace braid::train
