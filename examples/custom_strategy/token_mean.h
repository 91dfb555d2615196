// TokenMean: a strategy defined outside the library that changes the step loop.
//
// Plain gradient accumulation averages the micro-batches' mean losses, so a token in a
// micro-batch with few counted targets (the rest masked as -1: padding, prompts) weighs more
// than one in a full micro-batch, and the step's gradient is not that of the whole batch.
// TokenMean weights each micro-batch by its counted targets over the step's total on every
// data-parallel rank, so the step's gradient and loss are exactly those of the mean over all
// of the step's counted tokens: one forward of the whole global batch, whatever the split.
//
// It wraps the library's data-parallel strategy (ddp or zero1, option `over`), which keeps its
// buckets, clipping, update and checkpoint state; only forward_backward is new. It runs its
// own step, so it refuses to run inside a pipeline (which runs the step itself).
#pragma once

#include <memory>

#include "braid/parallel/strategy_wrapper.h"

namespace token_mean {

class TokenMean final : public braid::parallel::StrategyWrapper {
 public:
  explicit TokenMean(std::unique_ptr<braid::parallel::Strategy> data_parallel)
      : StrategyWrapper(std::move(data_parallel)) {}
  std::string name() const override { return "token_mean(" + inner_->name() + ")"; }

  void setup(braid::nn::Module& model, braid::optim::Optimizer& optimizer,
             const braid::dist::ParallelGrid& grid) override;
  // Takes every batch of the step first (the weights need the step's total), sums the counted
  // targets over dp, then runs forward and backward of each, its loss times
  // counted * dp / total (the wrapped strategy averages gradients over dp). Collective over dp.
  braid::parallel::StepLoss forward_backward(const braid::nn::Gpt& model,
                                             const braid::parallel::StepBatches& batches) override;

 private:
  braid::dist::ProcessGroupPtr dp_;
};

// Registers "token_mean": option `over` names the strategy it wraps (default ddp); every other
// option goes to that strategy (e.g. bucket_mb).
void register_token_mean();

}  // namespace token_mean
