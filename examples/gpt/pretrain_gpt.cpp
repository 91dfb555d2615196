// GPT pretraining example: reads a config (+ overrides), trains on one or more ranks,
// validates, prints a sample. Resumes from the config's checkpoints (resume: "latest");
// --fresh deletes them first and starts over.
//   pretrain_gpt --config examples/gpt/configs/tiny.textproto [--steps N] [--set a.b=v] [--fresh]
//   mpirun -np 2 pretrain_gpt --config ... --set parallel.dp=2
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/logging.h"
#include "braid/dist/bootstrap.h"
#include "braid/train/trainer.h"

int main(int argc, char** argv) {
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
      if (env->world()->rank() == 0 && !dir.empty()) std::filesystem::remove_all(dir);
      env->world()->barrier()->wait();
    }
    braid::train::Trainer trainer(std::move(config), env->world());
    trainer.fit();
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pretrain_gpt: error: %s\n", e.what());
    // Peers may be inside a collective with this rank: end the whole job, not just this rank.
    if (env && env->world_size() > 1) braid::dist::abort_job(1);
    return 1;
  }
}
