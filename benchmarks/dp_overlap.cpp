// How much of data parallel's gradient all-reduce hides behind the backward pass.
//   mpirun -np 2 dp_overlap [--layers 4 --width 256 --heads 4 --batch 4 --seq 128 --steps 6
//                            --bucket_mb 4 --json out.json]
//
// Method (printed with the result): on every rank, time
//   T_bwd  = backward alone (no communication),
//   T_comm = the same buckets all-reduced back to back with nothing else running,
//   T_ddp  = backward + waiting for DDP's bucket reductions (launched from grad-ready hooks).
// exposed = T_ddp - T_bwd is communication the backward did not hide; hidden fraction =
// 1 - exposed / T_comm. Medians over steps; rank 0 reports.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "braid/core/generator.h"
#include "braid/dist/bootstrap.h"
#include "braid/nn/gpt.h"
#include "braid/parallel/data_parallel.h"
#include "support/bench_support.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const std::vector<braid::bench::FlagSpec> kFlags = {
    {"layers", "N", "4", "transformer blocks"},
    {"width", "C", "256", "model width"},
    {"heads", "H", "4", "attention heads"},
    {"batch", "B", "4", "sequences per rank and step"},
    {"seq", "T", "128", "tokens per sequence"},
    {"steps", "N", "6", "timed steps (one more warms up)"},
    {"bucket_mb", "MB", "4", "DDP gradient bucket size in MiB"},
    {"json", "FILE", "", "also write the results as JSON"}};
const braid::Usage kUsage = braid::bench::bench_usage(
    "dp_overlap", "How much of data parallel's gradient all-reduce hides behind the backward pass.",
    "mpirun -np 2 dp_overlap --layers 4 --bucket_mb 4 --json dp.json", kFlags);

}  // namespace

int main(int argc, char** argv) {
  using namespace braid;
  // --help and command-line mistakes are answered before MPI starts.
  if (const std::optional<int> status = answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  dist::Environment* env = nullptr;
  try {
    env = &dist::init(&argc, &argv);
    bench::Flags flags = bench::parse_flags(kUsage, kFlags, argc, argv);
    auto num = [&](const char* k) { return parse_integer(std::string("--") + k, flags[k]); };
    nn::GptConfig cfg;
    cfg.n_layer = num("layers");
    cfg.n_head = num("heads");
    cfg.n_embd = num("width");
    cfg.block_size = num("seq");
    const int64_t B = num("batch"), T = num("seq"), steps = num("steps");
    nn::Gpt model(cfg);
    model.init_weights(1);
    optim::AdamW adamw(optim::decay_groups(model.named_parameters(), 0.1f), {});
    dist::ParallelGrid grid(env->world(),
                            dist::ParallelGrid::default_axes(1, 1, env->world_size(), 1));
    parallel::DataParallel ddp(
        parallel::DataParallelOptions::parse({{"bucket_mb", flags["bucket_mb"]}}, false));
    ddp.setup(model, adamw, grid);

    std::vector<int32_t> ids(B * T), targets(B * T);
    for (int64_t i = 0; i < B * T; ++i) {
      ids[i] = static_cast<int32_t>(uniform_at(3, env->world_rank(), i) * 50000);
      targets[i] = static_cast<int32_t>(uniform_at(4, env->world_rank(), i) * 50000);
    }
    const Tensor x = Tensor::from_vector(ids, {B, T}), y = Tensor::from_vector(targets, {B, T});
    auto& world = *env->world();

    std::vector<double> bwd, ddp_ms, comm;
    for (int64_t s = 0; s < steps + 1; ++s) {  // the first round warms up
      // Backward alone: hooks stay disarmed (begin_backward(false) = an accumulation step).
      model.zero_grad();
      Tensor loss = model.loss(x, y);
      world.barrier()->wait();
      ddp.begin_backward(false);
      auto t0 = Clock::now();
      loss.backward();
      const double t_bwd = ms_since(t0);
      // Communication alone: every bucket reduced back to back.
      world.barrier()->wait();
      t0 = Clock::now();
      ddp.begin_backward(true);
      ddp.finish_backward();  // no hook fired, so this launches and waits all buckets
      const double t_comm = ms_since(t0);
      // DDP: reductions launched from the hooks during the backward.
      model.zero_grad();
      loss = model.loss(x, y);
      world.barrier()->wait();
      ddp.begin_backward(true);
      t0 = Clock::now();
      loss.backward();
      ddp.finish_backward();
      const double t_ddp = ms_since(t0);
      if (s == 0) continue;
      bwd.push_back(t_bwd);
      comm.push_back(t_comm);
      ddp_ms.push_back(t_ddp);
    }
    const double tb = median(bwd), tc = median(comm), td = median(ddp_ms);
    const double exposed = std::max(0.0, td - tb);
    const double hidden = tc > 0 ? std::clamp(1.0 - exposed / tc, 0.0, 1.0) : 0.0;
    if (env->world_rank() == 0) {
      std::printf(
          "dp_overlap: %d ranks, %lld layers width %lld, B=%lld T=%lld, %zu buckets of %s MiB\n",
          env->world_size(), (long long)cfg.n_layer, (long long)cfg.n_embd, (long long)B,
          (long long)T, ddp.num_buckets(), flags["bucket_mb"].c_str());
      std::printf(
          "method: T_bwd = backward alone, T_comm = buckets all-reduced back to back,\n"
          "        T_ddp = backward + DDP wait; hidden = 1 - (T_ddp - T_bwd) / T_comm\n");
      std::printf(
          "%-10s %10s\n%-10s %10.1f\n%-10s %10.1f\n%-10s %10.1f\n%-10s %10.1f\n%-10s %9.0f%%\n",
          "metric", "ms", "T_bwd", tb, "T_comm", tc, "T_ddp", td, "exposed", exposed, "hidden",
          100 * hidden);
      if (!flags["json"].empty()) {
        nlohmann::json j = {{"ranks", env->world_size()},
                            {"buckets", ddp.num_buckets()},
                            {"t_bwd_ms", tb},
                            {"t_comm_ms", tc},
                            {"t_ddp_ms", td},
                            {"exposed_ms", exposed},
                            {"hidden_fraction", hidden}};
        j.update(bench::run_facts_json(argc, argv));
        std::ofstream(flags["json"]) << j.dump(1) << "\n";
      }
    }
    dist::finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dp_overlap: error: %s\n", e.what());
    if (env && env->world_size() > 1) dist::abort_job(1);
    return 1;
  }
}
