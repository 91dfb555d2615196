// Step-metric formatting and the progress bar (the MFU peak: peak_flops.cpp).
#include "braid/train/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "braid/core/error.h"

namespace braid::train {

std::string format_step(const StepMetrics& m, int64_t total_steps) {
  std::string line = fmt::format(
      "step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {:.0f} tok/s | "
      "MFU {:.1f}% | peak {:.0f} MiB{}",
      m.step + 1, total_steps, m.loss, m.lr, m.grad_norm, m.step_ms, m.tokens_per_s, 100.0 * m.mfu,
      static_cast<double>(m.peak_bytes) / (1 << 20), m.skipped ? " | SKIPPED" : "");
  if (m.on_device) {
    constexpr double kMiB = 1 << 20;
    line += fmt::format(" | device {:.0f}/{:.0f} MiB, peak {:.0f} MiB, {} mallocs",
                        static_cast<double>(m.device_allocated_bytes) / kMiB,
                        static_cast<double>(m.device_reserved_bytes) / kMiB,
                        static_cast<double>(m.device_peak_bytes) / kMiB, m.device_mallocs);
  }
  return line;
}

namespace {

// The variables OpenMPI's mpirun, PMIx launchers (prterun, srun --mpi=pmix), MPICH/Hydra and
// Slurm's srun give each rank.
constexpr const char* kLauncherVars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                         "SLURM_PROCID"};

// The launcher variables as the process started with them, read before main(), so before
// MPI_Init: OpenMPI's singleton init sets PMIX_RANK in a process that no launcher started.
const std::map<std::string, std::string> kLaunchEnvironment = [] {
  std::map<std::string, std::string> vars;
  for (const char* name : kLauncherVars)
    if (const char* value = std::getenv(name)) vars[name] = value;
  return vars;
}();

}  // namespace

bool progress_bar_wanted(const std::function<const char*(const char*)>& env,
                         bool stdout_is_terminal) {
  const char* asked = env("BRAID_PROGRESS");
  if (asked != nullptr && *asked != '\0') {
    const std::string value = asked;
    BRAID_CHECK(value == "0" || value == "1",
                "BRAID_PROGRESS must be 1 (draw the progress bar) or 0 (never), got '{}'", value);
    return value == "1";
  }
  for (const char* launcher_var : kLauncherVars)
    if (env(launcher_var) != nullptr) return false;
  return stdout_is_terminal;
}

ProgressBar::ProgressBar(int64_t total) : total_(total), active_(false) {
  if (total <= 0) return;
  // BRAID_PROGRESS as it is now; the launcher's variables as they were at start.
  const auto env = [](const char* name) -> const char* {
    if (std::string_view(name) == "BRAID_PROGRESS") return std::getenv(name);
    const auto it = kLaunchEnvironment.find(name);
    return it == kLaunchEnvironment.end() ? nullptr : it->second.c_str();
  };
  active_ = progress_bar_wanted(env, isatty(STDOUT_FILENO) == 1);
}

void ProgressBar::update(const StepMetrics& m) {
  if (!active_) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * (m.step + 1) / std::max<int64_t>(total_, 1));
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::printf("\r[%s] %lld/%lld loss %.4f %.0f tok/s ", bar.c_str(),
              static_cast<long long>(m.step + 1), static_cast<long long>(total_), m.loss,
              m.tokens_per_s);
  std::fflush(stdout);
}

void ProgressBar::finish() {
  if (!active_) return;
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace braid::train
