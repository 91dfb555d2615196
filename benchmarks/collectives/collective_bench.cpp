// Bus bandwidth of braid's MPI backend next to raw MPI calls in the same run, so the cost of
// braid's queue, progress thread and Work handles shows up as one overhead column.
//
// busbw follows the nccl-tests convention: algbw = bytes / time, all_reduce busbw = algbw *
// 2(n-1)/n, reduce_scatter and all_gather busbw = algbw * (n-1)/n, where bytes is the full
// buffer (the all_reduce tensor, the reduce_scatter input, the all_gather output). Both sides
// issue one operation and wait for it before the next, each on its own duplicated communicator:
// braid through its ProcessGroup (its own ring), raw through MPI_Allreduce in place,
// MPI_Reduce_scatter and MPI_Allgatherv. A size's time is the slowest rank's; the overhead
// column is the median of per-round ratios (time_both).
//
//   mpirun -np 4 collective_bench [--min-bytes 4096] [--max-bytes 67108864] [--factor 2]
//                                 [--json out.json]
#include <mpi.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/dist/bootstrap.h"
#include "support/bench_support.h"

namespace {

using braid::Tensor;
using braid::dist::ProcessGroup;

struct Options {
  int64_t min_bytes = 4 << 10;
  int64_t max_bytes = 64 << 20;
  int64_t factor = 2;
  std::string json;
};

const std::vector<braid::bench::FlagSpec> kFlags = {
    {"min-bytes", "N", "4096", "smallest buffer"},
    {"max-bytes", "N", "67108864", "largest buffer"},
    {"factor", "F", "2", "each size is the previous one times F"},
    {"json", "FILE", "", "also write the results as JSON"}};
const braid::Usage kUsage = braid::bench::bench_usage(
    "collective_bench",
    "Bus bandwidth of braid's MPI collectives next to raw MPI calls, in the same run.",
    "mpirun -np 4 collective_bench --max-bytes 16777216 --json collectives.json", kFlags);

Options parse(int argc, char** argv) {
  braid::bench::Flags flags = braid::bench::parse_flags(kUsage, kFlags, argc, argv);
  Options o;
  o.min_bytes = braid::parse_integer("--min-bytes", flags["min-bytes"]);
  o.max_bytes = braid::parse_integer("--max-bytes", flags["max-bytes"]);
  o.factor = braid::parse_integer("--factor", flags["factor"]);
  o.json = flags["json"];
  BRAID_CHECK(o.min_bytes >= 4 && o.max_bytes >= o.min_bytes && o.factor >= 2,
              "need 4 <= --min-bytes <= --max-bytes and --factor >= 2");
  return o;
}

// Seconds per operation: warm-up, then `iters` back-to-back operations, slowest rank wins.
double time_per_op(MPI_Comm sync, int iters, const std::function<void()>& op) {
  for (int i = 0; i < 2; ++i) op();
  MPI_Barrier(sync);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) op();
  double elapsed = MPI_Wtime() - start;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, sync);
  return elapsed / iters;
}

// Both sides measured in alternating order over a few rounds. Each side's fastest round gives
// its time (interference only ever slows a round down); the overhead is the median over rounds
// of braid's time over raw's in the same round, so that drifts of the shared machine between
// rounds (10-20% here) cancel in each pair. Measuring one side always first would hand it the
// quieter moments.
struct Timing {
  double raw_s = 1e30, braid_s = 1e30, overhead_pct = 0;
};

Timing time_both(MPI_Comm sync, int iters, const std::function<void()>& raw_op,
                 const std::function<void()>& braid_op) {
  constexpr int kRounds = 8;
  Timing timing;
  std::vector<double> ratios;
  for (int round = 0; round < kRounds; ++round) {
    const bool raw_first = round % 2 == 0;
    double t[2] = {0, 0};  // raw, braid
    for (int side = 0; side < 2; ++side) {
      const bool raw = (side == 0) == raw_first;
      t[raw ? 0 : 1] = time_per_op(sync, iters, raw ? raw_op : braid_op);
    }
    timing.raw_s = std::min(timing.raw_s, t[0]);
    timing.braid_s = std::min(timing.braid_s, t[1]);
    ratios.push_back(t[1] / t[0]);
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = (ratios[kRounds / 2 - 1] + ratios[kRounds / 2]) / 2;
  timing.overhead_pct = (median - 1.0) * 100.0;
  return timing;
}

struct Row {
  std::string op;
  int64_t bytes;
  double bus_factor;
  Timing timing;
};

}  // namespace

int main(int argc, char** argv) {
  // --help and command-line mistakes are answered before MPI starts.
  if (const std::optional<int> status = braid::answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  try {
    braid::dist::Environment& env = braid::dist::init(&argc, &argv);
    const Options opt = parse(argc, argv);
    ProcessGroup& group = *env.world();
    const int n = env.world_size(), rank = env.world_rank();
    MPI_Comm raw;
    MPI_Comm_dup(MPI_COMM_WORLD, &raw);
    MPI_Comm sync;
    MPI_Comm_dup(MPI_COMM_WORLD, &sync);

    std::vector<Row> rows;
    for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= opt.factor) {
      const int64_t numel = bytes / 4;
      // About 256 MiB moved per measurement and round, and at least 8 operations: with fewer,
      // one slow operation decides a round's ratio (32-64 MiB swung by 15-20% at 3).
      const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / bytes, 8, 400));
      std::vector<int> counts(n), displs(n);
      for (int r = 0; r < n; ++r) {
        counts[r] = static_cast<int>(braid::dist::chunk_size(numel, n, r));
        displs[r] = static_cast<int>(braid::dist::chunk_offset(numel, n, r));
      }
      Tensor full = Tensor::full({numel}, 1.0f);
      Tensor chunk = Tensor::full({counts[rank]}, 1.0f);
      float* full_p = full.data<float>();
      float* chunk_p = chunk.data<float>();
      const int count = static_cast<int>(numel);

      rows.push_back(
          {"all_reduce", bytes, 2.0 * (n - 1) / n,
           time_both(
               sync, iters,
               [&] { MPI_Allreduce(MPI_IN_PLACE, full_p, count, MPI_FLOAT, MPI_SUM, raw); },
               [&] { group.all_reduce(full)->wait(); })});
      rows.push_back(
          {"reduce_scatter", bytes, static_cast<double>(n - 1) / n,
           time_both(
               sync, iters,
               [&] { MPI_Reduce_scatter(full_p, chunk_p, counts.data(), MPI_FLOAT, MPI_SUM, raw); },
               [&] { group.reduce_scatter(full, chunk)->wait(); })});
      rows.push_back({"all_gather", bytes, static_cast<double>(n - 1) / n,
                      time_both(
                          sync, iters,
                          [&] {
                            MPI_Allgatherv(chunk_p, counts[rank], MPI_FLOAT, full_p, counts.data(),
                                           displs.data(), MPI_FLOAT, raw);
                          },
                          [&] { group.all_gather(chunk, full)->wait(); })});
    }

    if (rank == 0) {
      auto size_str = [](int64_t b) {
        return b >= (1 << 20) ? fmt::format("{} MiB", b >> 20) : fmt::format("{} KiB", b >> 10);
      };
      fmt::print("MPI collectives, {} ranks, f32; busbw in GB/s (nccl-tests convention)\n", n);
      fmt::print("{:>9} {:<15} {:>11} {:>11} {:>12} {:>12} {:>10}\n", "size", "op", "braid us",
                 "raw us", "braid busbw", "raw busbw", "overhead");
      nlohmann::json results = nlohmann::json::array();
      for (const Row& r : rows) {
        const double braid_bw = r.bytes / r.timing.braid_s * r.bus_factor / 1e9;
        const double raw_bw = r.bytes / r.timing.raw_s * r.bus_factor / 1e9;
        const double overhead = r.timing.overhead_pct;
        fmt::print("{:>9} {:<15} {:>11.1f} {:>11.1f} {:>12.3f} {:>12.3f} {:>9.1f}%\n",
                   size_str(r.bytes), r.op, r.timing.braid_s * 1e6, r.timing.raw_s * 1e6, braid_bw,
                   raw_bw, overhead);
        results.push_back({{"op", r.op},
                           {"bytes", r.bytes},
                           {"braid_us", r.timing.braid_s * 1e6},
                           {"raw_us", r.timing.raw_s * 1e6},
                           {"braid_busbw_gbps", braid_bw},
                           {"raw_busbw_gbps", raw_bw},
                           {"overhead_pct", overhead}});
      }
      if (!opt.json.empty()) {
        nlohmann::json doc = {{"benchmark", "collectives"},
                              {"backend", "mpi"},
                              {"dtype", "f32"},
                              {"world_size", n},
                              {"busbw_convention", "nccl-tests"},
                              {"results", results}};
        doc.update(braid::bench::run_facts_json(argc, argv));
        std::ofstream(opt.json) << doc.dump(2) << "\n";
        fmt::print("wrote {}\n", opt.json);
      }
    }
    MPI_Comm_free(&raw);
    MPI_Comm_free(&sync);
    braid::dist::finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collective_bench: %s\n", e.what());
    braid::dist::abort_job(1);
  }
  return 0;
}
