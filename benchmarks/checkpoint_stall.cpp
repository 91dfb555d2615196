// Checkpoint stall: how long training stops for each checkpoint mode, and what it costs after.
//   checkpoint_stall [--models small,124m --every 10,50 --modes sync,async
//                     --steps-small 60 --steps-124m 30 --warmup 2 --after 2 --pairs 6
//                     --threads 0 --window 7 --device cpu
//                     --json benchmarks/results/checkpoint_stall.json]
// benchmarks/checkpoint_stall.sh runs it from any folder with the build's binary.
//
// One process, one rank, on the CPU or (--device cuda) the state on a CUDA device. For every
// (model, interval, mode) a fresh Trainer (AdamW, grad clip 1.0, checkpoint keep 2,
// every_steps 0, checkpoint.window from --window) runs `warmup`
// untimed steps, then the measured steps, calling save_checkpoint() after measured step k
// whenever k % every == 0. Per row:
//   ckpts      save_checkpoint() calls / checkpoints committed by the end of the run (a mode
//              that finishes a checkpoint steps later may leave the last one unwritten);
//   stall      wall time of the save_checkpoint() call: what training waits for (mean over
//              the run's checkpoints), also as a fraction of an ordinary step. On a device
//              the host runs up to two steps ahead of it: the steps already issued are waited
//              for first (Trainer::sync_device_metrics), outside the stall, so the stall is
//              the time the device has no training work;
//   step       median wall time of the ordinary steps: those not among the `after` (--after,
//              default 2) steps that follow a checkpoint;
//   after      the mean of the `after` steps after a checkpoint / the ordinary step, median
//              over the checkpoints: how much an asynchronous write (or the page cache
//              flushing a synchronous one) slows compute. Per checkpoint first, because the
//              write tends to land on the first step only: a median over all following steps
//              would report the untouched second steps. The JSON also has the extra
//              milliseconds (after_checkpoint_extra_ms: those steps minus as many ordinary
//              ones). A mode that spreads its copy over the steps after save() (overlapped:
//              its window, 7 by default) needs --after at least that long to be compared;
//   window     the steps an overlapped window is open after save() (window - 1), and
//   write      the steps from then until the checkpoint was seen committed (its write beside
//              them), each as mean step time over the ordinary step, median over checkpoints;
//              "-" where no step ran (sync, or a write done before the next step);
//   MiB/ckpt   bytes of the committed step folder (every checkpoint holds the same tensors);
//   copied     MiB the last checkpoint copied in host memory (Checkpointer::bytes_copied: the
//              state, or an overlapped window's blocks plus the gradients it recorded);
//   +peak      the snapshot buffer the checkpointer holds from prepare_checkpoint() on,
//              plus the growth of the tracked host allocator's peak during save() (braid::
//              host_memory_stats): the tensor copies. Buffers outside the allocator (the
//              serialisation string of the shard file) do not show here, hence
//   +rss       growth of the process's resident high-water mark (VmHWM, reset through
//              /proc/self/clear_refs) from just before save() to the end of the `after`
//              steps after it, over the resident size before save(): all memory, including an
//              asynchronous writer's buffers while they live inside that window;
//   wait       the final wait_for_checkpoint() (the last asynchronous write finishing);
//   overhead   (wall time of the measured steps, saves and final wait - steps x S)
//              / (steps x S), S the MEAN ordinary step: the whole cost of checkpointing at
//              this interval. The mean, not the median, so that steps x S is what the steps
//              would have taken without checkpoints even when step times are skewed (a busy
//              machine); the JSON also has overhead_pct_vs_median, the same with the median.
//              It charges the whole run for the last checkpoint's write (the final wait), and
//              its baseline S comes from the few steps no checkpoint touches, so it moves by
//              several percent between runs on a busy machine; hence
//   cost ms    one checkpoint's cost from a second trainer (run_paired): the median over
//              --pairs pairs of adjacent intervals of `every` steps, one opening with a
//              checkpoint and waiting for it to commit at its end, one without;
//   paired     that cost over the interval without: the overhead of checkpointing every
//              `every` steps (blank for overlapped when `every` is shorter than its window).
// An interval at least as long as the run saves nothing; its row shows dashes (JSON null).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braid/ckpt/checkpoint.h"
#include "braid/core/allocator.h"
#include "braid/core/generator.h"
#include "braid/data/token_shard.h"
#include "braid/train/trainer.h"
#include "support/bench_support.h"

namespace {

using namespace braid;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1048576.0;

struct ModelSpec {
  std::string name;
  int64_t layers, width, heads, vocab, seq, batch;
  std::string steps_flag;
};

// "small": the byte-level GPT of the examples; "124m": GPT-2 124M's shape with short sequences
// so one step stays within seconds on two cores (the state, and so the checkpoint, is full size);
// "gpt2": GPT-2 124M as it trains on a GPU (4 sequences of 1024 tokens a step).
const std::vector<ModelSpec> kModels = {{"small", 4, 256, 4, 257, 128, 4, "steps-small"},
                                        {"124m", 12, 768, 12, 50257, 64, 1, "steps-124m"},
                                        {"gpt2", 12, 768, 12, 50257, 1024, 4, "steps-gpt2"}};

struct SaveSample {
  int64_t after_step = 0;    // measured step the checkpoint follows (1-based)
  int64_t lands_at = 0;      // the training step it holds (overlapped: window - 1 steps later)
  int64_t commit_step = -1;  // measured step after which it was seen committed (after_step:
                             // within save(); steps + 1: only at the final wait)
  double stall_ms = 0;
  int64_t extra_peak_bytes = 0;   // tracked allocator: peak during save() - live before it
  int64_t held_bytes = 0;         // tracked allocator: live after save() - live before it
  int64_t rss_growth_bytes = -1;  // -1: the kernel does not expose or reset VmHWM
};

struct RunResult {
  std::vector<double> step_ms;
  std::vector<SaveSample> saves;
  int64_t window_steps = 0;  // steps an overlapped window stays open after save()
  double wait_ms = 0, total_ms = 0;
  int64_t bytes_per_checkpoint = 0;
  int64_t bytes_copied = 0;  // host-memory copies of the last checkpoint
  int64_t committed = 0;     // distinct checkpoints seen committed during and after the run
  int64_t buffer_bytes = 0;  // the snapshot buffer held from prepare_checkpoint() on
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

using bench::median;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A field of /proc/self/status in bytes ("VmHWM", "VmRSS"), or -1 where there is none.
int64_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  return -1;
}

// Restarts the resident high-water mark from the current resident size (Linux >= 4.0).
bool reset_rss_peak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

int64_t folder_bytes(const fs::path& folder) {
  int64_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(folder))
    if (entry.is_regular_file()) total += static_cast<int64_t>(entry.file_size());
  return total;
}

std::unique_ptr<train::Trainer> make_trainer(const ModelSpec& m, const std::string& mode,
                                             int64_t window, int64_t threads,
                                             const std::string& device, const fs::path& data_dir,
                                             const fs::path& ckpt_dir) {
  fs::remove_all(ckpt_dir);
  const std::string config =
      fmt::format(R"(
model {{ vocab_size: {} n_layer: {} n_head: {} n_embd: {} block_size: {} }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-4 weight_decay: 0.1 grad_clip: 1.0 }}
training {{ steps: 1000000 batch_size: {} seq_len: {} val_every: 0 log_every: 1000000 threads: {} seed: 1 device: "{}" }}
checkpoint {{ dir: "{}" mode: "{}" window: {} keep: 2 every_steps: 0 }}
)",
                  m.vocab, m.layers, m.heads, m.width, m.seq, data_dir.string(), m.batch, m.seq,
                  threads, device, ckpt_dir.string(), mode, window);
  return std::make_unique<train::Trainer>(train::parse_config(config, "checkpoint_stall"));
}

RunResult run(const ModelSpec& m, int64_t steps, int64_t every, int64_t after,
              const std::string& mode, int64_t window, int64_t warmup, int64_t threads,
              const std::string& device, const fs::path& data_dir, const fs::path& ckpt_dir) {
  const auto owned_trainer = make_trainer(m, mode, window, threads, device, data_dir, ckpt_dir);
  train::Trainer& trainer = *owned_trainer;
  // The first steps allocate the optimizer state and warm the caches: not a checkpoint's cost.
  // Then the snapshot buffer is prepared, as fit() does after its first step (waited for
  // here, so that its one-time page faults stay out of the measured steps), and counted.
  for (int64_t i = 0; i < warmup; ++i) trainer.train_step();
  RunResult r;
  const int64_t live_before_buffer = host_memory_stats().current_bytes;
  trainer.prepare_checkpoint();
  trainer.wait_for_checkpoint();
  r.buffer_bytes = host_memory_stats().current_bytes - live_before_buffer;

  int64_t rss_before = -1;  // resident size before the save whose window is open
  int open = -1;            // index of the save whose +rss window is still open
  auto close_rss_window = [&] {
    if (open >= 0 && rss_before >= 0) {
      const int64_t hwm = proc_status_bytes("VmHWM");
      if (hwm >= 0) r.saves[open].rss_growth_bytes = std::max<int64_t>(0, hwm - rss_before);
    }
    open = -1;
  };
  // Commits happen on a writer thread or steps after save(), and keep: 2 deletes old ones:
  // count the distinct newest checkpoints seen between steps (a directory read, microseconds).
  // A commit also dates every earlier checkpoint's: they commit in order.
  std::set<std::string> seen;
  auto observe_commits = [&](int64_t k) {
    if (!ckpt::has_committed_checkpoint(ckpt_dir.string())) return;
    const fs::path newest = ckpt::resolve_checkpoint(ckpt_dir.string());
    seen.insert(newest.string());
    const int64_t landed = std::stoll(newest.filename().string().substr(5));  // step_<N>
    for (SaveSample& s : r.saves)
      if (s.commit_step < 0 && s.lands_at <= landed) s.commit_step = k;
  };
  if (mode == "overlapped") r.window_steps = trainer.config().checkpoint().window() - 1;
  const auto run_start = Clock::now();
  for (int64_t k = 1; k <= steps; ++k) {
    // Wall time of the whole call rather than StepMetrics.step_ms, so that steps and saves
    // add up to the run's wall time in the overhead.
    const auto t0 = Clock::now();
    trainer.train_step();
    r.step_ms.push_back(ms_since(t0));
    observe_commits(k);
    if (open >= 0 && k == r.saves[open].after_step + after) close_rss_window();
    if (k % every != 0) continue;
    close_rss_window();  // every <= after: the next save starts before the window ends
    SaveSample s;
    s.after_step = k;
    s.lands_at = trainer.step() + r.window_steps;
    const MemoryStats before = host_memory_stats();
    rss_before = reset_rss_peak() ? proc_status_bytes("VmRSS") : -1;
    reset_host_peak();
    trainer.sync_device_metrics();  // on a device: the steps issued so far finish first
    const auto t_save = Clock::now();
    trainer.save_checkpoint();
    s.stall_ms = ms_since(t_save);
    const MemoryStats after = host_memory_stats();
    s.extra_peak_bytes = after.peak_bytes - before.current_bytes;
    s.held_bytes = after.current_bytes - before.current_bytes;
    r.saves.push_back(s);
    open = static_cast<int>(r.saves.size()) - 1;
    observe_commits(k);  // sync commits within save()
  }
  const auto t_wait = Clock::now();
  trainer.wait_for_checkpoint();
  r.wait_ms = ms_since(t_wait);
  r.total_ms = ms_since(run_start);
  close_rss_window();
  observe_commits(steps + 1);
  r.committed = static_cast<int64_t>(seen.size());
  r.bytes_copied = trainer.checkpointer()->bytes_copied();
  if (r.committed > 0) r.bytes_per_checkpoint = folder_bytes(ckpt::resolve_checkpoint(ckpt_dir));
  return r;
}

// The cost of one checkpoint, from pairs of adjacent intervals of `every` steps: one opens
// with a checkpoint and ends by waiting for it to commit, so its stall, its window, its write
// competing with the steps and any final wait all fall inside it; the other has no
// checkpoint. The order alternates between pairs, so a machine that drifts faster or slower
// over the run favours neither side, and each pair's difference is taken between intervals
// seconds apart. Cost over the clean interval is the overhead of checkpointing every `every`
// steps, provided one checkpoint finishes within an interval (it is waited for otherwise,
// which counts against it).
struct PairedResult {
  std::vector<double> cost_ms, clean_ms;  // per pair
};

PairedResult run_paired(const ModelSpec& m, int64_t every, int64_t pairs, const std::string& mode,
                        int64_t window, int64_t warmup, int64_t threads, const std::string& device,
                        const fs::path& data_dir, const fs::path& ckpt_dir) {
  PairedResult r;
  const auto trainer = make_trainer(m, mode, window, threads, device, data_dir, ckpt_dir);
  // An overlapped checkpoint commits window - 1 steps after save(): it must land in its interval.
  if (mode == "overlapped" && every < trainer->config().checkpoint().window()) return r;
  for (int64_t i = 0; i < warmup; ++i) trainer->train_step();
  trainer->prepare_checkpoint();
  trainer->wait_for_checkpoint();
  auto interval = [&](bool checkpointed) {
    const auto t0 = Clock::now();
    if (checkpointed) trainer->save_checkpoint();
    for (int64_t k = 0; k < every; ++k) trainer->train_step();
    if (checkpointed) trainer->wait_for_checkpoint();
    trainer->sync_device_metrics();  // on a device: the interval ends when its steps have run
    return ms_since(t0);
  };
  for (int64_t p = 0; p < pairs; ++p) {
    double with = 0, without = 0;
    if (p % 2 == 0) {
      with = interval(true);
      without = interval(false);
    } else {
      without = interval(false);
      with = interval(true);
    }
    r.cost_ms.push_back(with - without);
    r.clean_ms.push_back(without);
  }
  return r;
}

struct Row {
  double stall_ms = kNaN, stall_max_ms = kNaN, stall_per_step = kNaN, step_ms = kNaN,
         after_ratio = kNaN, after_extra_ms = kNaN, window_ratio = kNaN, write_ratio = kNaN,
         mib = kNaN, peak_mib = kNaN, held_mib = kNaN, rss_mib = kNaN, overhead_pct = kNaN,
         overhead_pct_vs_median = kNaN;
};

Row summarise(const RunResult& r, int64_t steps, int64_t after) {
  std::vector<bool> after_save(static_cast<size_t>(steps + 1), false);
  for (const auto& s : r.saves)
    for (int64_t k = s.after_step + 1; k <= std::min(steps, s.after_step + after); ++k)
      after_save[static_cast<size_t>(k)] = true;
  std::vector<double> ordinary;
  for (int64_t k = 1; k <= steps; ++k)
    if (!after_save[static_cast<size_t>(k)])
      ordinary.push_back(r.step_ms[static_cast<size_t>(k - 1)]);
  Row row;
  row.step_ms = median(ordinary);
  auto overhead = [&](double step) { return 100.0 * (r.total_ms - steps * step) / (steps * step); };
  row.overhead_pct = ordinary.empty()
                         ? kNaN
                         : overhead(std::accumulate(ordinary.begin(), ordinary.end(), 0.0) /
                                    static_cast<double>(ordinary.size()));
  row.overhead_pct_vs_median = overhead(row.step_ms);
  if (r.saves.empty()) return row;
  double stall = 0, peak = 0, held = 0, rss = 0;
  row.stall_max_ms = 0;
  bool rss_known = true;
  for (const auto& s : r.saves) {
    stall += s.stall_ms;
    row.stall_max_ms = std::max(row.stall_max_ms, s.stall_ms);
    peak = std::max(peak, static_cast<double>(s.extra_peak_bytes));
    held = std::max(held, static_cast<double>(s.held_bytes));
    rss_known = rss_known && s.rss_growth_bytes >= 0;
    rss = std::max(rss, static_cast<double>(s.rss_growth_bytes));
  }
  row.stall_ms = stall / static_cast<double>(r.saves.size());
  row.stall_per_step = row.stall_ms / row.step_ms;
  std::vector<double> ratios, extras;
  for (const auto& s : r.saves) {
    double sum = 0;
    int64_t n = 0;
    for (int64_t k = s.after_step + 1; k <= std::min(steps, s.after_step + after); ++k, ++n)
      sum += r.step_ms[static_cast<size_t>(k - 1)];
    if (n == 0) continue;  // the run ended with this checkpoint
    ratios.push_back(sum / static_cast<double>(n) / row.step_ms);
    extras.push_back(sum - static_cast<double>(n) * row.step_ms);
  }
  row.after_ratio = median(ratios);
  row.after_extra_ms = median(extras);
  // The same split at the window's end: steps with the window open, then steps until the
  // commit was seen (the write running beside them).
  auto inflation = [&](auto first, auto last) {
    std::vector<double> per_save;
    for (const auto& s : r.saves) {
      const int64_t a = first(s), b = std::min(steps, last(s));
      if (s.commit_step < 0 || b < a) continue;
      double sum = 0;
      for (int64_t k = a; k <= b; ++k) sum += r.step_ms[static_cast<size_t>(k - 1)];
      per_save.push_back(sum / static_cast<double>(b - a + 1) / row.step_ms);
    }
    return per_save.empty() ? kNaN : median(per_save);
  };
  const int64_t w = r.window_steps;
  row.window_ratio = inflation([](const SaveSample& s) { return s.after_step + 1; },
                               [&](const SaveSample& s) { return s.after_step + w; });
  row.write_ratio = inflation([&](const SaveSample& s) { return s.after_step + w + 1; },
                              [](const SaveSample& s) { return s.commit_step; });
  row.mib = static_cast<double>(r.bytes_per_checkpoint) / kMiB;
  row.peak_mib = (peak + static_cast<double>(r.buffer_bytes)) / kMiB;
  row.held_mib = held / kMiB;
  if (rss_known) row.rss_mib = rss / kMiB;
  return row;
}

// A number, or "-" for NaN (no checkpoint in the run, or no measurement).
std::string cell(double v, int width, int decimals) {
  return std::isnan(v) ? fmt::format("{:>{}}", "-", width)
                       : fmt::format("{:>{}.{}f}", v, width, decimals);
}

const std::vector<bench::FlagSpec> kFlags = {
    {"models", "LIST", "small,124m", "models to run (small, 124m, gpt2)"},
    {"every", "LIST", "10,50", "checkpoint intervals in steps"},
    {"modes", "LIST", "sync,async", "checkpoint modes (ckpt::Mode names)"},
    {"steps-small", "N", "60", "measured steps of the small model"},
    {"steps-124m", "N", "30", "measured steps of the 124M model"},
    {"steps-gpt2", "N", "40", "measured steps of the GPT-2 model (T=1024; for a GPU)"},
    {"warmup", "N", "2", "untimed steps first"},
    {"after", "N", "2", "steps after a checkpoint charged to it"},
    {"pairs", "N", "6", "interval pairs of the paired cost measurement (0: none)"},
    {"threads", "N", "0", "OpenMP threads (0: OpenMP decides)"},
    {"window", "N", "7", "checkpoint.window of the overlapped mode"},
    {"device", "D", "cpu", "training.device: cpu, or cuda (the state on the GPU)"},
    {"json", "FILE", "benchmarks/results/checkpoint_stall.json", "where to write the results"}};
const Usage kUsage = bench::bench_usage(
    "checkpoint_stall",
    "How long training stops for each checkpoint mode, and what it costs in the steps after.",
    "checkpoint_stall --models small --every 10 --modes sync,async,overlapped", kFlags);

}  // namespace

int main(int argc, char** argv) {
  if (const std::optional<int> status = answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  const fs::path tmp =
      fs::temp_directory_path() / ("braid_checkpoint_stall_" + std::to_string(::getpid()));
  try {
    bench::Flags flags = bench::parse_flags(kUsage, kFlags, argc, argv);
    // Unknown modes fail here, before any model is built; a mode added to ckpt::Mode works
    // without touching this file.
    const std::vector<std::string> modes = split(flags["modes"]);
    BRAID_CHECK(!modes.empty(), "--modes is empty; expected e.g. sync,async");
    for (const auto& mode : modes) ckpt::mode_from_name(mode);
    std::vector<int64_t> intervals;
    for (const auto& e : split(flags["every"])) {
      intervals.push_back(braid::parse_integer("--every", e));
      BRAID_CHECK(intervals.back() > 0, "--every takes positive step counts, got {}", e);
    }
    std::vector<ModelSpec> models;
    for (const auto& name : split(flags["models"])) {
      const auto it = std::find_if(kModels.begin(), kModels.end(),
                                   [&](const ModelSpec& m) { return m.name == name; });
      BRAID_CHECK(it != kModels.end(), "unknown model '{}' (expected small, 124m or gpt2)", name);
      models.push_back(*it);
    }
    const int64_t warmup = braid::parse_integer("--warmup", flags["warmup"]),
                  threads = braid::parse_integer("--threads", flags["threads"]);
    const int64_t after = braid::parse_integer("--after", flags["after"]);
    BRAID_CHECK(after >= 1, "--after must be at least 1, got {}", after);
    const int64_t pairs = braid::parse_integer("--pairs", flags["pairs"]);
    BRAID_CHECK(pairs >= 0, "--pairs must be >= 0 (0: no paired measurement), got {}", pairs);
    const int64_t window = braid::parse_integer("--window", flags["window"]);
    BRAID_CHECK(window >= 1, "--window must be >= 1 (steps an overlapped window spans), got {}",
                window);
    const std::string device = flags["device"];

    nlohmann::json rows = nlohmann::json::array();
    const std::string header = fmt::format(
        "{:<6} {:>5} {:<10} {:>7} {:>9} {:>10} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} "
        "{:>9} {:>8} {:>8} {:>8}",
        "model", "every", "mode", "ckpts", "stall ms", "stall/step", "step ms", "after", "window",
        "write", "MiB/ckpt", "copied", "+peak", "+rss", "wait ms", "overhead", "cost ms", "paired");
    for (const auto& m : models) {
      const int64_t steps =
          braid::parse_integer(std::string("--") + m.steps_flag, flags[m.steps_flag]);
      BRAID_CHECK(steps > 0, "--{} must be positive", m.steps_flag);
      const fs::path data_dir = tmp / ("data_" + m.name);
      bench::write_random_tokens(data_dir, m.vocab);
      std::printf(
          "\n%s: %lld layers, width %lld, %lld heads, vocab %lld, batch %lld x %lld; "
          "%lld measured steps after %lld warm-up\n%s\n",
          m.name.c_str(), (long long)m.layers, (long long)m.width, (long long)m.heads,
          (long long)m.vocab, (long long)m.batch, (long long)m.seq, (long long)steps,
          (long long)warmup, header.c_str());
      for (const int64_t every : intervals) {
        for (const auto& mode : modes) {
          const RunResult r = run(m, steps, every, after, mode, window, warmup, threads, device,
                                  data_dir, tmp / "ckpt");
          const Row row = summarise(r, steps, after);
          const PairedResult paired = pairs > 0
                                          ? run_paired(m, every, pairs, mode, window, warmup,
                                                       threads, device, data_dir, tmp / "ckpt")
                                          : PairedResult{};
          fs::remove_all(tmp / "ckpt");
          std::vector<double> paired_pct;
          for (size_t i = 0; i < paired.cost_ms.size(); ++i)
            paired_pct.push_back(100.0 * paired.cost_ms[i] / paired.clean_ms[i]);
          const double cost_ms = paired.cost_ms.empty() ? kNaN : median(paired.cost_ms);
          const double paired_overhead = paired_pct.empty() ? kNaN : median(paired_pct);
          std::printf(
              "%-6s %5lld %-10s %7s %s %s %s %s %s %s %s %s %s %s %s %s %s %s\n", m.name.c_str(),
              (long long)every, mode.c_str(),
              fmt::format("{}/{}", r.saves.size(), r.committed).c_str(),
              cell(row.stall_ms, 9, 1).c_str(), cell(row.stall_per_step, 10, 2).c_str(),
              cell(row.step_ms, 8, 1).c_str(), cell(row.after_ratio, 6, 2).c_str(),
              cell(row.window_ratio, 6, 2).c_str(), cell(row.write_ratio, 6, 2).c_str(),
              cell(row.mib, 8, 1).c_str(),
              cell(r.saves.empty() ? kNaN : static_cast<double>(r.bytes_copied) / kMiB, 8, 1)
                  .c_str(),
              cell(row.peak_mib, 8, 1).c_str(), cell(row.rss_mib, 8, 1).c_str(),
              cell(r.wait_ms, 8, 1).c_str(), (cell(row.overhead_pct, 8, 1) + "%").c_str(),
              cell(cost_ms, 8, 1).c_str(), (cell(paired_overhead, 7, 2) + "%").c_str());
          std::fflush(stdout);
          nlohmann::json saves = nlohmann::json::array();
          for (const auto& s : r.saves)
            saves.push_back({{"after_step", s.after_step},
                             {"commit_step", s.commit_step},
                             {"stall_ms", s.stall_ms},
                             {"extra_peak_bytes", s.extra_peak_bytes},
                             {"held_after_save_bytes", s.held_bytes},
                             {"rss_growth_bytes", s.rss_growth_bytes}});
          rows.push_back({{"model", m.name},
                          {"device", device},
                          {"layers", m.layers},
                          {"width", m.width},
                          {"heads", m.heads},
                          {"vocab", m.vocab},
                          {"batch", m.batch},
                          {"seq", m.seq},
                          {"every", every},
                          {"mode", mode},
                          {"window", window},
                          {"steps", steps},
                          {"warmup", warmup},
                          {"checkpoints", r.saves.size()},
                          {"committed", r.committed},
                          {"after_steps", after},
                          {"stall_ms_mean", row.stall_ms},  // NaN dumps as null
                          {"stall_ms_max", row.stall_max_ms},
                          {"stall_per_ordinary_step", row.stall_per_step},
                          {"ordinary_step_ms_median", row.step_ms},
                          {"after_checkpoint_inflation", row.after_ratio},
                          {"after_checkpoint_extra_ms", row.after_extra_ms},
                          {"window_inflation", row.window_ratio},
                          {"write_inflation", row.write_ratio},
                          {"bytes_per_checkpoint", r.bytes_per_checkpoint},
                          {"bytes_copied_per_checkpoint", r.bytes_copied},
                          {"extra_peak_mib", row.peak_mib},
                          {"held_after_save_mib", row.held_mib},
                          {"rss_growth_mib", row.rss_mib},
                          {"final_wait_ms", r.wait_ms},
                          {"total_ms", r.total_ms},
                          {"overhead_pct", row.overhead_pct},
                          {"overhead_pct_vs_median", row.overhead_pct_vs_median},
                          {"paired_cost_ms", paired.cost_ms},
                          {"paired_clean_interval_ms", paired.clean_ms},
                          {"paired_cost_ms_median", cost_ms},
                          {"paired_overhead_pct_median", paired_overhead},
                          {"step_ms", r.step_ms},
                          {"saves", saves}});
        }
      }
    }
    std::printf(
        "\nckpts: saves requested/committed; stall/step: stall over the ordinary (median) step\n"
        "after: the %lld steps after a checkpoint over as many ordinary ones (median over them)\n"
        "window / write: the steps with an overlapped window open / from then until the commit\n"
        "  was seen, over ordinary steps (median over checkpoints; '-': no such step)\n"
        "copied: MiB copied in memory; +peak: snapshot buffer + tracked allocator growth during "
        "save (MiB)\n"
        "+rss: resident high-water growth over save + %lld steps (MiB)\n"
        "overhead: the run's extra wall time against its mean ordinary step\n"
        "cost ms: one checkpoint's cost, the median over %lld pairs of intervals of `every` steps\n"
        "  with and without one; paired: that cost over the interval without\n",
        (long long)after, (long long)after, (long long)pairs);
    const fs::path json = flags["json"];
    if (!json.empty()) {
      if (json.has_parent_path()) fs::create_directories(json.parent_path());
      nlohmann::json doc = {{"benchmark", "checkpoint_stall"}, {"rows", rows}};
      doc.update(bench::run_facts_json(argc, argv));
      std::ofstream(json) << doc.dump(2) << "\n";
      std::printf("wrote %s\n", json.string().c_str());
    }
    fs::remove_all(tmp);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_stall: error: %s\n", e.what());
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return 1;
  }
}
