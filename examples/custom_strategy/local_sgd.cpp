// LocalSgd's hooks and its registration: everything a new strategy needs, outside braid.
#include "local_sgd.h"

#include "braid/autograd/grad_mode.h"

namespace local_sgd {

using braid::Tensor;

void LocalSgd::setup(braid::nn::Module& model, braid::optim::Optimizer& optimizer,
                     const braid::dist::ParallelGrid& grid) {
  Strategy::setup(model, optimizer, grid);
  group_ = grid.group("dp");
  // Start every replica from rank 0's weights.
  std::vector<braid::dist::WorkPtr> works;
  for (Tensor& p : model.parameters()) {
    Tensor data = p.detach();
    works.push_back(group_->broadcast(data, 0));
  }
  for (auto& w : works) w->wait();
}

void LocalSgd::step(float lr, float grad_scale) {
  optimizer_->step(lr, grad_scale);  // on this rank's gradients only
  if (++steps_ % period_ == 0) average_parameters();
}

void LocalSgd::average_parameters() {
  braid::autograd::NoGradGuard no_grad;
  // Launch every all-reduce, then wait: they run back to back on the group's thread.
  std::vector<braid::dist::WorkPtr> works;
  for (Tensor& p : model_->parameters()) {
    Tensor data = p.detach();
    works.push_back(group_->all_reduce(data, braid::dist::ReduceOp::avg));
  }
  for (auto& w : works) w->wait();
}

double LocalSgd::reduce_metric(double value) {
  Tensor t = Tensor::full({1}, static_cast<float>(value));
  group_->all_reduce(t, braid::dist::ReduceOp::avg)->wait();
  return t.item();
}

void register_local_sgd() {
  braid::parallel::register_strategy("local_sgd", [](const braid::parallel::StrategyOptions& o) {
    braid::parallel::OptionReader options(o, "local_sgd");
    const double period = options.number("period", 4);
    options.finish();
    BRAID_CHECK(period >= 1 && period == static_cast<int64_t>(period),
                "local_sgd period must be a whole number >= 1, got {}", period);
    return std::make_unique<LocalSgd>(static_cast<int64_t>(period));
  });
}

}  // namespace local_sgd
