// GPT pretraining example: reads a config (+ overrides), trains on one or more ranks,
// validates, prints a sample. Resumes from the config's checkpoints (resume: "latest");
// --fresh deletes them first and starts over. Exit status: 0 done, 1 error, 2 usage or a
// checkpoint folder in use by another run, 75 stopped by a signal after a checkpoint.
//   pretrain_gpt --config examples/gpt/configs/tiny.textproto [--steps N] [--set a.b=v] [--fresh]
//   mpirun -np 2 pretrain_gpt --config ... --set parallel.dp=2
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "braid/ckpt/run_lock.h"
#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "braid/core/logging.h"
#include "braid/dist/bootstrap.h"
#include "braid/train/stop_signals.h"
#include "braid/train/trainer.h"
#ifdef BRAID_WITH_NCCL
#include "dist/nccl_process_group.h"
#endif

namespace {

const braid::Usage kUsage{
    .program = "pretrain_gpt",
    .synopsis = "--config FILE [--steps N] [--set FIELD=VALUE]... [--fresh]",
    .summary =
        "Trains a GPT as the training config says (on every rank a launcher started, else as\n"
        "one rank), validates, prints a sample. Resumes from the config's checkpoints.",
    .flags = {{"--config", "FILE", "training config (protobuf text)", true},
              {"--steps", "N", "train N steps (shorthand for --set training.steps=N)"},
              {"--set", "FIELD=VALUE",
               "override one config field, e.g. model.n_layer=2; repeatable"},
              {"--fresh", "",
               "delete the config's checkpoints and start over instead of resuming"}},
    .example =
        "mpirun -np 2 pretrain_gpt --config examples/gpt/configs/tiny.textproto "
        "--set parallel.dp=2 --steps 50",
    .notes =
        "The training config's schema, every field with its default: "
        "src/proto/train_config.proto.\n"
        "SIGTERM, SIGINT or SIGUSR1 stop every rank after the current step with a checkpoint;\n"
        "a second signal exits at once. Exit status: 0 done, 1 error, 2 usage error or\n"
        "checkpoint folder in use by another run, 75 stopped by a signal (rerun to resume)."};

}  // namespace

int main(int argc, char** argv) {
  // --help and command-line mistakes are answered before MPI starts.
  if (const std::optional<int> status = braid::answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  braid::dist::Environment* env = nullptr;
  try {
    env = &braid::dist::init(&argc, &argv);
    std::vector<std::string> rest;
    std::vector<std::string> args(argv + 1, argv + argc);
    const auto fresh = std::find(args.begin(), args.end(), "--fresh");
    const bool start_fresh = fresh != args.end();
    if (start_fresh) args.erase(fresh);
    braid::train::TrainConfig config = braid::train::config_from_args(args, &rest);
    BRAID_CHECK(rest.empty(),
                "unknown argument '{}' (expected --config, --steps, --set or --fresh)",
                rest.empty() ? "" : rest.front());
    if (start_fresh) {
      config.proto.set_resume("");
      const std::string& dir = config.checkpoint().dir();
      // Under the folder's run lock: --fresh never deletes the checkpoints of a run in progress.
      if (!dir.empty()) braid::ckpt::remove_checkpoints(dir, *env->world());
    }
#ifdef BRAID_WITH_NCCL
    // training.device cuda over several ranks reduces through NCCL.
    braid::train::Trainer trainer(std::move(config), env->world(), braid::dist::nccl_group_factory);
#else
    braid::train::Trainer trainer(std::move(config), env->world());
#endif
    trainer.fit();
    if (trainer.stopped_by() != 0) {  // a stop signal: checkpointed, rerun to resume
      braid::dist::finalize();
      return braid::train::kExitStoppedBySignal;
    }
    const auto& vals = trainer.val_history();
    if (trainer.is_lead() && vals.size() >= 2)
      braid::log().info("validation loss {:.4f} -> {:.4f}", vals.front().second,
                        vals.back().second);
    if (trainer.samples_here() && trainer.config().sample().tokens() > 0) {
      const std::string text = trainer.sample(trainer.config().sample().prompt());
      if (trainer.is_lead()) std::printf("---- sample ----\n%s\n----------------\n", text.c_str());
    }
    braid::dist::finalize();
    return 0;
  } catch (const braid::ckpt::DirectoryInUse& e) {
    // Every rank learnt it together: none is left waiting in a collective.
    std::fprintf(stderr, "pretrain_gpt: error: %s\n", e.what());
    braid::dist::finalize();
    return braid::kUsageExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pretrain_gpt: error: %s\n", e.what());
    // Peers may be inside a collective with this rank: end the whole job, not just this rank.
    if (env && env->world_size() > 1) braid::dist::abort_job(1);
    return 1;
  }
}
