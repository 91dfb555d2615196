// StrategyWrapper: every hook handed to the wrapped strategy.
#include "braid/parallel/strategy_wrapper.h"

namespace braid::parallel {

StrategyWrapper::StrategyWrapper(std::unique_ptr<Strategy> inner) : inner_(std::move(inner)) {
  BRAID_CHECK(inner_ != nullptr, "a strategy wrapper needs a strategy to wrap");
}

nn::GptStagePart StrategyWrapper::model_part(const nn::GptConfig& config,
                                             const dist::ParallelGrid& grid) {
  return inner_->model_part(config, grid);
}

void StrategyWrapper::share_parameters(std::vector<SharedParameter> shared) {
  inner_->share_parameters(std::move(shared));
}

const std::vector<SharedParameter>& StrategyWrapper::shared_parameters() const {
  return inner_->shared_parameters();
}

void StrategyWrapper::setup(nn::Module& model, optim::Optimizer& optimizer,
                            const dist::ParallelGrid& grid) {
  Strategy::setup(model, optimizer, grid);
  inner_->setup(model, optimizer, grid);
}

StepLoss StrategyWrapper::forward_backward(const nn::Gpt& model, const StepBatches& batches) {
  return inner_->forward_backward(model, batches);
}

double StrategyWrapper::eval_loss(const nn::Gpt& model, const data::Batch& batch) {
  return inner_->eval_loss(model, batch);
}

std::vector<int32_t> StrategyWrapper::generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                               const nn::SampleOptions& options) {
  return inner_->generate(model, std::move(prompt), options);
}

void StrategyWrapper::begin_backward(bool last_micro_step) {
  inner_->begin_backward(last_micro_step);
}

void StrategyWrapper::on_grad_ready(Tensor& param) {
  inner_->on_grad_ready(param);
}

void StrategyWrapper::finish_backward() {
  inner_->finish_backward();
}

optim::ClipResult StrategyWrapper::clip(float max_norm) {
  return inner_->clip(max_norm);
}

void StrategyWrapper::step(float lr, float grad_scale) {
  inner_->step(lr, grad_scale);
}

double StrategyWrapper::reduce_metric(double value) {
  return inner_->reduce_metric(value);
}

std::map<std::string, Tensor> StrategyWrapper::state() const {
  return inner_->state();
}

optim::OwnedState StrategyWrapper::owned_state(optim::Optimizer& optimizer) {
  return inner_->owned_state(optimizer);
}

void StrategyWrapper::after_load(const optim::Optimizer& optimizer) {
  inner_->after_load(optimizer);
}

void StrategyWrapper::gather_optimizer_state(optim::Optimizer& optimizer) {
  inner_->gather_optimizer_state(optimizer);
}

}  // namespace braid::parallel
