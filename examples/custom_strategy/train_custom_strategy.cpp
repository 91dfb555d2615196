// pretrain_gpt with two more strategies, defined in this folder outside the library: local SGD
// (changes the update) and token_mean (changes the step loop); trains with whatever the
// config selects.
//   mpirun -np 2 train_custom_strategy --config examples/gpt/configs/tiny.textproto \
//       --set parallel.dp=2 --set parallel.strategy=local_sgd \
//       --set parallel.strategy_options.period=8
//   mpirun -np 2 train_custom_strategy --config examples/gpt/configs/tiny.textproto \
//       --set parallel.dp=2 --set parallel.strategy=token_mean \
//       --set parallel.strategy_options.over=zero1 --set training.grad_accum_steps=4
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "braid/ckpt/run_lock.h"
#include "braid/core/command_line.h"
#include "braid/dist/bootstrap.h"
#include "braid/train/stop_signals.h"
#include "braid/train/trainer.h"
#include "local_sgd.h"
#include "token_mean.h"

namespace {

const braid::Usage kUsage{
    .program = "train_custom_strategy",
    .synopsis = "--config FILE [--steps N] [--set FIELD=VALUE]...",
    .summary =
        "pretrain_gpt's training with two more strategies defined outside the library "
        "(parallel.strategy):\n\"local_sgd\" (parameters averaged every "
        "parallel.strategy_options.period steps) and\n\"token_mean\" (micro-batches weighted "
        "by their counted targets, over the strategy in\nparallel.strategy_options.over, "
        "default ddp).",
    .flags = {{"--config", "FILE", "training config (protobuf text)", true},
              {"--steps", "N", "train N steps (shorthand for --set training.steps=N)"},
              {"--set", "FIELD=VALUE",
               "override one config field, e.g. model.n_layer=2; repeatable"}},
    .example =
        "mpirun -np 2 train_custom_strategy --config examples/gpt/configs/tiny.textproto "
        "--set parallel.dp=2 --set parallel.strategy=local_sgd "
        "--set parallel.strategy_options.period=8",
    .notes =
        "The training config's schema, every field with its default: "
        "src/proto/train_config.proto."};

}  // namespace

int main(int argc, char** argv) {
  // --help and command-line mistakes are answered before MPI starts.
  if (const std::optional<int> status = braid::answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  braid::dist::Environment* env = nullptr;
  try {
    env = &braid::dist::init(&argc, &argv);
    local_sgd::register_local_sgd();
    token_mean::register_token_mean();
    braid::train::Trainer trainer(
        braid::train::config_from_args(std::vector<std::string>(argv + 1, argv + argc)),
        env->world());
    trainer.fit();
    braid::dist::finalize();
    return trainer.stopped_by() != 0 ? braid::train::kExitStoppedBySignal : 0;
  } catch (const braid::ckpt::DirectoryInUse& e) {
    std::fprintf(stderr, "train_custom_strategy: error: %s\n", e.what());
    braid::dist::finalize();
    return braid::kUsageExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_custom_strategy: error: %s\n", e.what());
    if (env && env->world_size() > 1) braid::dist::abort_job(1);
    return 1;
  }
}
