// Pipeline bubble: measured vs analytic idle fraction for each schedule on real ranks.
//   mpirun -np 4 pipeline_bubble [--layers 8 --width 128 --heads 4 --seq 64 --micro 8
//                                 --steps 4 --out benchmarks/results]
// For GPipe, 1F1B and interleaved 1F1B (2 chunks per stage) it trains a few steps of a small
// GPT (byte vocabulary, so the stages' compute is balanced) with pp = world size and one
// sequence per micro-batch, traces one step on every stage, and reports
//   measured  = 1 - (sum of the stages' compute time) / (stages x step span),
//   simulated = the validator's bubble for the same schedule with the measured mean forward
//               and backward times per chunk (what the schedule itself costs),
//   analytic  = (p - 1) / (v m + p - 1).
// Step 2 is traced (training.trace_steps, docs/tracing.md) into <out>/pipeline_<schedule>_run/;
// its pipeline actions, each less the wait for its input, are written per stage to
// <out>/pipeline_<schedule>.json (Chrome/Perfetto, benchmarks/render_trace.py draws it).
#include <unistd.h>

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
#include "braid/parallel/pipeline/validate.h"
#include "braid/train/trainer.h"
#include "support/bench_support.h"

namespace {

using namespace braid;
namespace pl = parallel::pipeline;

struct Measured {
  double bubble = 0, forward_us = 0, backward_us = 0, span_us = 0;
};

Measured measure(const std::vector<pl::TraceEvent>& events, int stages) {
  double first = 1e300, last = 0, busy = 0, fwd = 0, bwd = 0;
  int nf = 0, nb = 0;
  for (const auto& e : events) {
    first = std::min(first, e.start);
    last = std::max(last, e.start + e.duration);
    busy += e.duration;
    if (e.action.kind == pl::ActionKind::forward)
      fwd += e.duration, ++nf;
    else
      bwd += e.duration, ++nb;
  }
  Measured m;
  m.span_us = last - first;
  m.bubble = 1.0 - busy / (stages * m.span_us);
  m.forward_us = nf ? fwd / nf : 0;
  m.backward_us = nb ? bwd / nb : 0;
  return m;
}

const std::vector<bench::FlagSpec> kFlags = {
    {"layers", "N", "8", "transformer blocks"},
    {"width", "C", "128", "model width"},
    {"heads", "H", "4", "attention heads"},
    {"seq", "T", "64", "tokens per sequence (one sequence per micro-batch)"},
    {"micro", "M", "8", "micro-batches per step"},
    {"steps", "N", "4", "training steps per schedule"},
    {"out", "DIR", "benchmarks/results", "folder for the JSON and the traces"}};
const Usage kUsage = bench::bench_usage(
    "pipeline_bubble",
    "Measured vs analytic pipeline bubble of GPipe, 1F1B and interleaved 1F1B, pp = world size.",
    "mpirun -np 4 pipeline_bubble --layers 8 --micro 8 --out benchmarks/results", kFlags);

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
    const int pp = env->world()->size();
    BRAID_CHECK(pp >= 2, "run pipeline_bubble on several ranks (mpirun -np 4)");
    dir = bench::private_temp_folder("braid_pp_bench", env->world()->rank());
    bench::write_random_tokens(dir, 256, 100000);
    const bool lead = env->world()->rank() == 0;
    nlohmann::json results = nlohmann::json::array();
    if (lead)
      std::printf(
          "\npp=%d, %s micro-batches of 1 x %s tokens, %s layers of width %s\n"
          "%-18s %3s %9s %9s %9s %9s %9s %10s\n",
          pp, flags["micro"].c_str(), flags["seq"].c_str(), flags["layers"].c_str(),
          flags["width"].c_str(), "schedule", "v", "measured", "simulated", "analytic", "F us",
          "B us", "step ms");
    const std::vector<std::pair<std::string, int>> schedules = {
        {"gpipe", 1}, {"1f1b", 1}, {"interleaved_1f1b", 2}};
    for (const auto& [schedule, chunks] : schedules) {
      const std::string trace = flags["out"] + "/pipeline_" + schedule + ".json";
      const std::string run_dir = flags["out"] + "/pipeline_" + schedule + "_run";
      const std::string config =
          fmt::format(R"(
model {{ vocab_size: 257 n_layer: {} n_head: {} n_embd: {} block_size: {} }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-4 }}
training {{ steps: 100 batch_size: {} seq_len: {} val_every: 0 threads: 1 trace_steps: "2:2"
            run_dir: "{}" }}
parallel {{ pp: {} micro_batches: {} schedule: "{}" virtual_stages: {} }}
)",
                      flags["layers"], flags["heads"], flags["width"], flags["seq"], dir.string(),
                      flags["micro"], flags["seq"], run_dir, pp, flags["micro"], schedule, chunks);
      train::Trainer trainer(train::parse_config(config, "pipeline_bubble"), env->world());
      std::vector<double> step_ms;
      for (int i = 0; i < braid::parse_integer("--steps", flags["steps"]); ++i)
        step_ms.push_back(trainer.train_step().step_ms);  // step 2 is traced
      if (!lead) continue;
      std::ifstream in(run_dir + "/trace.json");
      const nlohmann::json j = nlohmann::json::parse(in);
      // The merged trace has one process per rank (pid = world rank = stage here); a compute
      // action's span holds the wait for its input first.
      std::map<std::pair<int, std::string>, double> waited;
      for (const auto& e : j.at("traceEvents"))
        if (e.value("cat", "") == "pipeline_wait" && e.at("ph") == "X")
          waited[{e.at("pid").get<int>(), e.at("name").get<std::string>()}] = e.at("dur");
      std::vector<pl::TraceEvent> events;
      for (const auto& e : j.at("traceEvents")) {
        if (e.value("cat", "") != "pipeline" || e.at("ph") != "X") continue;
        const std::string action = e.at("args").at("action");
        if (action != "forward" && action != "backward") continue;
        pl::TraceEvent ev;
        ev.stage = e.at("args").at("stage");
        ev.action = {action == "forward" ? pl::ActionKind::forward : pl::ActionKind::backward,
                     e.at("args").at("microbatch"), e.at("args").at("chunk")};
        const auto w = waited.find({e.at("pid").get<int>(), "wait " + ev.action.str()});
        const double wait = w == waited.end() ? 0.0 : w->second;
        ev.start = e.at("ts").get<double>() + wait;
        ev.duration = e.at("dur").get<double>() - wait;
        events.push_back(ev);
      }
      pl::write_chrome_trace(trace, events, schedule);
      const Measured m = measure(events, pp);
      const pl::ScheduleShape shape{
          pp, static_cast<int>(braid::parse_integer("--micro", flags["micro"])), chunks};
      const pl::ScheduleReport sim =
          pl::validate(pl::make_schedule(schedule, shape), {m.forward_us, m.backward_us, 0.0});
      std::sort(step_ms.begin(), step_ms.end());
      std::printf("%-18s %3d %9.3f %9.3f %9.3f %9.0f %9.0f %10.1f\n", schedule.c_str(), chunks,
                  m.bubble, sim.bubble_fraction, sim.analytic_bubble_fraction, m.forward_us,
                  m.backward_us, step_ms[step_ms.size() / 2]);
      results.push_back({{"schedule", schedule},
                         {"virtual_stages", chunks},
                         {"stages", pp},
                         {"micro_batches", shape.microbatches},
                         {"measured_bubble", m.bubble},
                         {"simulated_bubble", sim.bubble_fraction},
                         {"analytic_bubble", sim.analytic_bubble_fraction},
                         {"forward_us_mean", m.forward_us},
                         {"backward_us_mean", m.backward_us},
                         {"traced_step_span_us", m.span_us},
                         {"step_ms_median", step_ms[step_ms.size() / 2]},
                         {"trace", trace}});
    }
    if (lead) {
      const std::string path = flags["out"] + "/pipeline_bubble.json";
      nlohmann::json doc = {{"benchmark", "pipeline_bubble"}, {"schedules", results}};
      doc.update(bench::run_facts_json(argc, argv));
      std::ofstream(path) << doc.dump(2) << "\n";
      std::printf("wrote %s and the traces beside it\n", path.c_str());
    }
    std::filesystem::remove_all(dir);
    dist::finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_bubble: error: %s\n", e.what());
    if (!dir.empty()) std::filesystem::remove_all(dir);
    if (env && env->world_size() > 1) dist::abort_job(1);
    return 1;
  }
}
