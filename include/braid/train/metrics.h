// Training metrics: throughput, model FLOPs utilisation, and the terminal progress line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace braid::train {

struct StepMetrics {
  int64_t step = 0;  // 0-based optimizer step
  float loss = 0;    // mean over the step's micro-batches
  float lr = 0;
  double grad_norm = 0;  // before clipping
  double step_ms = 0;
  double tokens_per_s = 0;
  double mfu = 0;          // achieved / peak FLOP/s (peak_flops.h), by the DESIGN.md convention
  int64_t peak_bytes = 0;  // host allocator peak during the step
  bool skipped = false;    // non-finite loss or gradient, update skipped
  // Where this rank's step time went, ms: the forward and backward passes (communication they
  // wait for excluded), waiting for communication, the optimizer update (clipping included)
  // and the checkpoint's stall. Measured by the step's phase spans; 0 where unmeasured.
  double forward_ms = 0, backward_ms = 0, comm_wait_ms = 0, optimizer_ms = 0;
  double checkpoint_stall_ms = 0;
  // Training on a device: its allocator's counters after the step (braid/core/allocator.h).
  bool on_device = false;
  int64_t device_allocated_bytes = 0, device_reserved_bytes = 0, device_peak_bytes = 0;
  int64_t device_mallocs = 0;
};

// One line for logs: "step 10/200 | loss 5.1234 | lr 1.0e-03 | ..."; on a device it ends with
// the device memory: "| device 310/512 MiB, peak 400 MiB, 12 mallocs" (allocated/reserved).
std::string format_step(const StepMetrics& m, int64_t total_steps);

// Whether to draw the progress bar, from `env` (looks a variable up, nullptr when unset, as
// std::getenv does) and whether stdout is a terminal:
//   BRAID_PROGRESS=1 / =0 decides (empty counts as unset; any other value throws braid::Error);
//   else none under an MPI launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or SLURM_PROCID
//   set): mpirun gives ranks a pty even when its own output goes to a file, so a launch script
//   that sees a terminal passes BRAID_PROGRESS=1 down;
//   else a bar iff stdout is a terminal.
bool progress_bar_wanted(const std::function<const char*(const char*)>& env,
                         bool stdout_is_terminal);

// Draws a single-line progress bar on the terminal (\r-rewritten) when progress_bar_wanted says
// so for this process (the launcher variables as the process started with them, before MPI_Init
// could add its own); a no-op otherwise.
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
