// Tensor-parallel step time and communication per step, measured beside the analytic volume.
//   mpirun -np T tp_step_bench [--tp T] [--sp 0|1] [--layers 4 --width 256 --heads 4
//                               --vocab 50257 --batch 4 --seq 128 --steps 6 --warmup 2
//                               --threads N --json out.json]
// benchmarks/tp_bench.sh runs tp=1 and tp=2 (sequence parallel off and on) side by side.
//
// Measured: every collective the tp group issues during one training step (forward, backward,
// clipping, AdamW), from the process-wide collective log, as calls and buffer bytes (the
// tensor of an all-reduce, the whole buffer of a reduce-scatter or all-gather). Analytic: the
// same counted from the model (see expected_traffic). Wire bytes per rank assume ring
// algorithms: all-reduce 2(p-1)/p of the buffer, reduce-scatter and all-gather (p-1)/p.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "braid/core/generator.h"
#include "braid/data/token_shard.h"
#include "braid/dist/bootstrap.h"
#include "braid/dist/collective_log.h"
#include "braid/train/trainer.h"
#include "support/bench_support.h"

namespace {

using namespace braid;

struct ModelShape {
  int64_t layers, width, heads, vocab, batch, seq;
};

// Collectives of the tp group in one step with one micro-batch of B x T tokens.
dist::TrafficTable expected_traffic(const ModelShape& s, int tp, bool sp,
                                    const std::string& group) {
  if (tp == 1) return {};  // one rank: no tensor-parallel communication at all
  const int64_t activation = s.batch * s.seq * s.width * 4;  // one [B, T, C] f32 buffer
  const int64_t rows = s.batch * s.seq;
  std::map<std::string, dist::TrafficCount> ops;
  auto add = [&](const char* op, int64_t calls, int64_t bytes) {
    ops[op].calls += calls;
    ops[op].bytes += bytes;
  };
  const int64_t boundaries = 4 * s.layers + 2;  // entries and exits of the tp regions, per pass
  if (!sp) {
    // Forward: embedding + 2 row-parallel exits per block; backward: 2 column-parallel
    // entries per block + the LM head's entry.
    add("all_reduce", boundaries, boundaries * activation);
  } else {
    // Each all-reduce becomes a reduce-scatter plus an all-gather (one per pass each way).
    add("reduce_scatter", boundaries, boundaries * activation);
    add("all_gather", boundaries, boundaries * activation);
    // Replicated parameters in sequence-sharded regions: 2 LayerNorms and 2 row biases per
    // block, ln_f and the position table, each all-reduced once in the backward.
    add("all_reduce", 6 * s.layers + 3, ((6 * s.layers + 2) * s.width + s.seq * s.width) * 4);
  }
  add("all_reduce", 2, 3 * rows * 4);  // vocab-parallel loss: row maxima, exp-sums + targets
  add("all_reduce", 1, 4);             // gradient clipping: the sharded squares
  return {{group, ops}};
}

double wire_factor(const std::string& op, int p) {
  const double share = static_cast<double>(p - 1) / p;
  return op == "all_reduce" ? 2 * share : share;
}

using bench::median;

const std::vector<bench::FlagSpec> kFlags = {
    {"tp", "T", "1", "tensor-parallel ranks; must equal the world size"},
    {"sp", "0|1", "0", "sequence parallelism off or on"},
    {"layers", "N", "4", "transformer blocks"},
    {"width", "C", "256", "model width"},
    {"heads", "H", "4", "attention heads"},
    {"vocab", "V", "50257", "vocabulary size"},
    {"batch", "B", "4", "sequences per step"},
    {"seq", "T", "128", "tokens per sequence"},
    {"steps", "N", "6", "timed steps"},
    {"warmup", "N", "2", "untimed steps first"},
    {"threads", "N", "0", "OpenMP threads per rank (0: OpenMP decides)"},
    {"json", "FILE", "", "also write the results as JSON"}};
const Usage kUsage = bench::bench_usage(
    "tp_step_bench",
    "Tensor-parallel step time and collective traffic per step, beside the analytic volume.",
    "mpirun -np 2 tp_step_bench --tp 2 --sp 1 --steps 8 --json tp2.json", kFlags);

}  // namespace

int main(int argc, char** argv) {
  // --help and command-line mistakes are answered before MPI starts.
  if (const std::optional<int> status = answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  dist::Environment* env = nullptr;
  std::filesystem::path dir;
  try {
    env = &dist::init(&argc, &argv);
    bench::Flags flags = bench::parse_flags(kUsage, kFlags, argc, argv);
    auto num = [&](const char* k) { return parse_integer(std::string("--") + k, flags.at(k)); };
    const ModelShape s{num("layers"), num("width"), num("heads"),
                       num("vocab"),  num("batch"), num("seq")};
    const int tp = static_cast<int>(num("tp"));
    const bool sp = num("sp") != 0;
    const int world = env->world()->size();
    BRAID_CHECK(world == tp, "run tp_step_bench on tp ranks (mpirun -np {}), not {}", tp, world);
    dir = bench::private_temp_folder("braid_tp_bench", env->world()->rank());
    bench::write_random_tokens(dir, s.vocab);
    const std::string config =
        fmt::format(R"(
model {{ vocab_size: {} n_layer: {} n_head: {} n_embd: {} block_size: {} }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-4 weight_decay: 0.1 grad_clip: 1.0 }}
training {{ steps: 1000 batch_size: {} seq_len: {} val_every: 0 threads: {} }}
parallel {{ tp: {} sequence_parallel: {} }}
)",
                    s.vocab, s.layers, s.heads, s.width, s.seq, dir.string(), s.batch, s.seq,
                    num("threads"), tp, sp ? "true" : "false");
    train::Trainer trainer(train::parse_config(config, "tp_step_bench"), env->world());
    const std::string group = trainer.grid().group("tp")->name();
    for (int64_t i = 0; i < num("warmup"); ++i) trainer.train_step();
    std::vector<double> times;
    dist::TrafficTable measured;
    for (int64_t i = 0; i < num("steps"); ++i) {
      dist::collective_log().reset_traffic();
      times.push_back(trainer.train_step().step_ms);
      measured = dist::collective_log().traffic();
    }
    const std::map<std::string, dist::TrafficCount> got =
        measured.count(group) ? measured.at(group) : std::map<std::string, dist::TrafficCount>{};
    const dist::TrafficTable expected_table = expected_traffic(s, tp, sp, group);
    const std::map<std::string, dist::TrafficCount> expected =
        expected_table.count(group) ? expected_table.at(group)
                                    : std::map<std::string, dist::TrafficCount>{};
    if (!trainer.is_lead()) {
      std::filesystem::remove_all(dir);
      dist::finalize();
      return 0;
    }
    std::printf(
        "\ntp=%d sequence_parallel=%d: %lld layers, width %lld, batch %lld x %lld, "
        "%d threads per rank\n",
        tp, sp ? 1 : 0, (long long)s.layers, (long long)s.width, (long long)s.batch,
        (long long)s.seq, omp_get_max_threads());
    std::printf("  step time (median of %lld): %.1f ms\n", (long long)num("steps"), median(times));
    std::printf("  %-15s %8s %8s %12s %12s %14s\n", "op (tp group)", "calls", "expect", "MiB",
                "expect MiB", "wire MiB/rank");
    nlohmann::json ops = nlohmann::json::object();
    double wire_total = 0, bytes_total = 0, expected_total = 0;
    std::map<std::string, bool> names;
    for (const auto& [op, c] : got) names[op] = true;
    for (const auto& [op, c] : expected) names[op] = true;
    for (const auto& [op, unused] : names) {
      const dist::TrafficCount m = got.count(op) ? got.at(op) : dist::TrafficCount{};
      const dist::TrafficCount e = expected.count(op) ? expected.at(op) : dist::TrafficCount{};
      const double wire = static_cast<double>(m.bytes) * wire_factor(op, tp);
      std::printf("  %-15s %8lld %8lld %12.3f %12.3f %14.3f\n", op.c_str(), (long long)m.calls,
                  (long long)e.calls, m.bytes / 1048576.0, e.bytes / 1048576.0, wire / 1048576.0);
      ops[op] = {{"calls", m.calls},
                 {"bytes", m.bytes},
                 {"expected_calls", e.calls},
                 {"expected_bytes", e.bytes},
                 {"wire_bytes_per_rank", wire}};
      wire_total += wire;
      bytes_total += static_cast<double>(m.bytes);
      expected_total += static_cast<double>(e.bytes);
    }
    std::printf("  total: %.3f MiB measured, %.3f MiB analytic, %.3f MiB on the wire per rank\n",
                bytes_total / 1048576.0, expected_total / 1048576.0, wire_total / 1048576.0);
    if (!flags["json"].empty()) {
      nlohmann::json j = {{"tp", tp},
                          {"sequence_parallel", sp},
                          {"layers", s.layers},
                          {"width", s.width},
                          {"heads", s.heads},
                          {"vocab", s.vocab},
                          {"batch", s.batch},
                          {"seq", s.seq},
                          {"threads_per_rank", omp_get_max_threads()},
                          {"step_ms_median", median(times)},
                          {"step_ms", times},
                          {"ops", ops},
                          {"bytes_measured", bytes_total},
                          {"bytes_analytic", expected_total},
                          {"wire_bytes_per_rank", wire_total}};
      j.update(bench::run_facts_json(argc, argv));
      std::ofstream(flags["json"]) << j.dump(2) << "\n";
    }
    std::filesystem::remove_all(dir);
    dist::finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_step_bench: error: %s\n", e.what());
    if (!dir.empty()) std::filesystem::remove_all(dir);
    if (env && env->world_size() > 1) dist::abort_job(1);
    return 1;
  }
}
