// StrategyWrapper: a strategy made of another one plus what it changes (composition).
//
// Every hook forwards to the wrapped strategy, so a wrapper that overrides nothing trains
// exactly like the strategy it wraps; a subclass overrides the hooks it changes and keeps the
// rest. This is how layouts compose: the pipeline strategy wraps the data-parallel one (pp x
// dp, ZeRO-1 under pp) and replaces the step, evaluation, sampling and the model's part, while
// the gradient hooks, clipping, the update and the checkpoint state stay the wrapped
// strategy's. A strategy defined outside the library composes the same way
// (examples/custom_strategy/token_mean.h wraps ddp or zero1 and replaces the step loop).
//
// The default step loop calls begin_backward on the strategy running it: a wrapper that
// forwards forward_backward leaves begin_backward to the wrapped strategy's loop, so one that
// changes begin_backward runs the step itself as well.
#pragma once

#include <memory>

#include "braid/parallel/strategy.h"

namespace braid::parallel {

class StrategyWrapper : public Strategy {
 public:
  // `inner` must not be null.
  explicit StrategyWrapper(std::unique_ptr<Strategy> inner);

  std::string name() const override { return inner_->name(); }
  nn::GptStagePart model_part(const nn::GptConfig& config, const dist::ParallelGrid& grid) override;
  void share_parameters(std::vector<SharedParameter> shared) override;
  const std::vector<SharedParameter>& shared_parameters() const override;
  // Records model, optimizer and grid for the wrapper (Strategy::setup), then sets up the
  // wrapped strategy.
  void setup(nn::Module& model, optim::Optimizer& optimizer,
             const dist::ParallelGrid& grid) override;
  StepLoss forward_backward(const nn::Gpt& model, const StepBatches& batches) override;
  double eval_loss(const nn::Gpt& model, const data::Batch& batch) override;
  std::vector<int32_t> generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                const nn::SampleOptions& options) override;
  void begin_backward(bool last_micro_step) override;
  void on_grad_ready(Tensor& param) override;
  void finish_backward() override;
  optim::ClipResult clip(float max_norm) override;
  void step(float lr, float grad_scale) override;
  double reduce_metric(double value) override;
  std::map<std::string, Tensor> state() const override;
  optim::OwnedState owned_state(optim::Optimizer& optimizer) override;
  void after_load(const optim::Optimizer& optimizer) override;
  void gather_optimizer_state(optim::Optimizer& optimizer) override;

  // The wrapped strategy (tests and wrappers that look inside, e.g. at DataParallel's buckets).
  Strategy& inner() { return *inner_; }
  const Strategy& inner() const { return *inner_; }

 protected:
  std::unique_ptr<Strategy> inner_;
};

}  // namespace braid::parallel
