// LocalSgd: a parallel strategy defined outside the library (periodic parameter averaging).
//
// Each data-parallel rank steps on its own gradients; every `period` steps the parameters
// are averaged over the dp axis. period = 1 with plain SGD is data parallelism: averaging
// p - lr * g_r over ranks is p - lr * mean(g_r).
#pragma once

#include "braid/parallel/strategy.h"

namespace local_sgd {

class LocalSgd final : public braid::parallel::Strategy {
 public:
  explicit LocalSgd(int64_t period) : period_(period) {}
  std::string name() const override { return "local_sgd"; }

  void setup(braid::nn::Module& model, braid::optim::Optimizer& optimizer,
             const braid::dist::ParallelGrid& grid) override;
  void step(float lr, float grad_scale) override;
  double reduce_metric(double value) override;

 private:
  void average_parameters();
  int64_t period_;
  int64_t steps_ = 0;
  braid::dist::ProcessGroupPtr group_;
};

// Registers "local_sgd" (option: period, default 4) with braid's strategy registry.
void register_local_sgd();

}  // namespace local_sgd
