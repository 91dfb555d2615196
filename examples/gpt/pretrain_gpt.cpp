// GPT pretraining example: reads a config (+ overrides), trains on one or more ranks,
// validates, prints a sample.
//   pretrain_gpt --config examples/gpt/configs/tiny.textproto [--steps N] [--set a.b=v]
//   mpirun -np 2 pretrain_gpt --config ... --set parallel.dp=2
#include <cstdio>
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
    braid::train::TrainConfig config =
        braid::train::config_from_args(std::vector<std::string>(argv + 1, argv + argc), &rest);
    BRAID_CHECK(rest.empty(), "unknown argument '{}' (expected --config, --steps or --set)",
                rest.empty() ? "" : rest.front());
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
