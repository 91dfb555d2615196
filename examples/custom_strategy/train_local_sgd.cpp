// pretrain_gpt with one more strategy: registers local SGD (defined in this folder, outside
// the library) and trains with whatever the config selects.
//   mpirun -np 2 train_local_sgd --config examples/gpt/configs/tiny.textproto \
//       --set parallel.dp=2 --set parallel.strategy=local_sgd \
//       --set parallel.strategy_options.period=8
#include <cstdio>
#include <string>
#include <vector>

#include "braid/dist/bootstrap.h"
#include "braid/train/trainer.h"
#include "local_sgd.h"

int main(int argc, char** argv) {
  braid::dist::Environment* env = nullptr;
  try {
    env = &braid::dist::init(&argc, &argv);
    local_sgd::register_local_sgd();
    braid::train::Trainer trainer(
        braid::train::config_from_args(std::vector<std::string>(argv + 1, argv + argc)),
        env->world());
    trainer.fit();
    braid::dist::finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_local_sgd: error: %s\n", e.what());
    if (env && env->world_size() > 1) braid::dist::abort_job(1);
    return 1;
  }
}
