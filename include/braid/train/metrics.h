// Training metrics: throughput, model FLOPs utilisation, and the terminal progress line.
#pragma once

#include <cstdint>
#include <string>

namespace braid::train {

struct StepMetrics {
  int64_t step = 0;  // 0-based optimizer step
  float loss = 0;    // mean over the step's micro-batches
  float lr = 0;
  double grad_norm = 0;  // before clipping
  double step_ms = 0;
  double tokens_per_s = 0;
  double mfu = 0;          // achieved / peak FLOP/s, by the DESIGN.md convention
  int64_t peak_bytes = 0;  // host allocator peak during the step
  bool skipped = false;    // non-finite loss or gradient, update skipped
};

// Peak FLOP/s of this host measured with sgemm on all OpenMP threads (best of a few runs of a
// square product); the MFU denominator on CPU.
double measure_cpu_peak_flops();

// One line for logs: "step 10/200 | loss 5.1234 | lr 1.0e-03 | ...".
std::string format_step(const StepMetrics& m, int64_t total_steps);

// Draws a single-line progress bar on the terminal (\r-rewritten); no-op when stdout is not
// a terminal or BRAID_PROGRESS=0.
class ProgressBar {
 public:
  explicit ProgressBar(int64_t total);
  void update(const StepMetrics& m);
  void finish();
  bool active() const { return active_; }

 private:
  int64_t total_;
  bool active_;
};

}  // namespace braid::train
