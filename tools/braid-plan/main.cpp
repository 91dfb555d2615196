// braid-plan: plans a training run from its config before it starts. `memory` prints, per rank
// of the layout, the bytes of parameters, gradients, optimizer state, activations (each
// recompute / sequence-parallel variant) and communication buffers at the step's peak.
//   braid-plan memory --config examples/gpt/configs/gpt2_124m.textproto [--set F=V]... [--json]
#include <fmt/format.h>
#include <algorithm>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "braid/train/config.h"
#include "braid/train/memory_plan.h"

namespace {

const braid::Usage kUsage{
    .program = "braid-plan",
    .synopsis = "memory --config FILE [--steps N] [--set FIELD=VALUE]... [--json]",
    .summary =
        "Prints the memory a training config needs on each rank of its layout (parameters,\n"
        "gradients, optimizer state, activations with and without recompute and sequence\n"
        "parallelism, communication buffers, total), read from the config alone.",
    .arguments = {{"PLAN", "", "what to plan: memory (the one plan there is)", true}},
    .flags = {{"--config", "FILE", "training config (protobuf text), as pretrain_gpt reads it",
               true},
              {"--steps", "N", "shorthand for --set training.steps=N"},
              {"--set", "FIELD=VALUE",
               "override one config field, e.g. training.batch_size=4; repeatable"},
              {"--json", "", "print the plan as JSON instead of a table"}},
    .example =
        "braid-plan memory --config examples/gpt/configs/gpt2_124m.textproto "
        "--set parallel.tp=2 --set parallel.dp=2 --set parallel.strategy=zero1",
    .notes =
        "What each line counts: docs/memory.md. The config's schema: "
        "src/proto/train_config.proto."};

}  // namespace

int main(int argc, char** argv) {
  if (const std::optional<int> status = braid::answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  try {
    const braid::CommandLine cl = braid::parse_command_line(kUsage, {argv + 1, argv + argc});
    if (cl.arguments.front() != "memory")
      throw braid::UsageError(fmt::format("'{}' is not a plan braid-plan makes (expected memory)",
                                          cl.arguments.front()));
    // The rest is the training config's command line, read as pretrain_gpt reads it, except that
    // plan_memory validates it: a plan for training.device cuda needs no device here.
    braid::train::TrainConfig config = braid::train::load_config(*cl.value("--config"));
    std::vector<std::string> overrides;
    for (const auto& [flag, value] : cl.flags) {
      if (flag == "--json" || flag == "--config") continue;
      overrides.push_back(flag);
      overrides.push_back(value);
    }
    const std::vector<std::string> rest = braid::train::apply_overrides(config, overrides);
    BRAID_CHECK(rest.empty(), "unknown argument '{}' (expected --config, --steps, --set or --json)",
                rest.empty() ? "" : rest.front());
    const bool as_json = cl.has("--json");
    const braid::train::MemoryPlan plan = braid::train::plan_memory(config);
    const std::string text =
        as_json ? braid::train::memory_plan_json(plan) : braid::train::memory_plan_table(plan);
    std::fputs(text.c_str(), stdout);
    return 0;
  } catch (const braid::UsageError& e) {
    return braid::print_usage_error(kUsage, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-plan: error: %s\n", e.what());
    return 1;
  }
}
