// GPT pretraining example: reads a config (+ overrides), trains, validates, prints a sample.
//   pretrain_gpt --config examples/gpt/configs/tiny.textproto [--steps N] [--set a.b=v]
#include <cstdio>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/logging.h"
#include "braid/train/trainer.h"

int main(int argc, char** argv) {
  try {
    std::vector<std::string> rest;
    braid::train::TrainConfig config =
        braid::train::config_from_args(std::vector<std::string>(argv + 1, argv + argc), &rest);
    BRAID_CHECK(rest.empty(), "unknown argument '{}' (expected --config, --steps or --set)",
                rest.empty() ? "" : rest.front());
    braid::train::Trainer trainer(std::move(config));
    trainer.fit();
    const auto& vals = trainer.val_history();
    if (vals.size() >= 2)
      braid::log().info("validation loss {:.4f} -> {:.4f}", vals.front().second,
                        vals.back().second);
    if (trainer.config().sample().tokens() > 0) {
      const std::string text = trainer.sample(trainer.config().sample().prompt());
      std::printf("---- sample ----\n%s\n----------------\n", text.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pretrain_gpt: error: %s\n", e.what());
    return 1;
  }
}
