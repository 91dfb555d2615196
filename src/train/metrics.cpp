// Step-metric formatting, the CPU peak-FLOP/s probe and the progress bar.
#include "braid/train/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/cpu/sgemm_backend.h"

namespace braid::train {

double measure_cpu_peak_flops() {
  constexpr int kN = 768;
  std::vector<float> a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN, 0.0f);
  double best = 0;
  for (int run = 0; run < 4; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    ops::cpu::row_major_sgemm(false, false, kN, kN, kN, 1.0f, a.data(), kN, b.data(), kN, 0.0f,
                              c.data(), kN);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * kN * kN * kN / s);
  }
  return best;
}

std::string format_step(const StepMetrics& m, int64_t total_steps) {
  return fmt::format(
      "step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {:.0f} tok/s | "
      "MFU {:.1f}% | peak {:.0f} MiB{}",
      m.step + 1, total_steps, m.loss, m.lr, m.grad_norm, m.step_ms, m.tokens_per_s, 100.0 * m.mfu,
      static_cast<double>(m.peak_bytes) / (1 << 20), m.skipped ? " | SKIPPED" : "");
}

namespace {

// A terminal on stdout, unless BRAID_PROGRESS says otherwise (mpirun gives ranks a pty even
// when its own output goes to a file, so launch scripts pass the real answer down).
bool progress_wanted() {
  if (const char* env = std::getenv("BRAID_PROGRESS")) return std::string(env) != "0";
  return isatty(STDOUT_FILENO) == 1;
}

}  // namespace

ProgressBar::ProgressBar(int64_t total) : total_(total), active_(total > 0 && progress_wanted()) {}

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
