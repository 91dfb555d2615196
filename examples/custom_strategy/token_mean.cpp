// TokenMean's step loop and its registration, outside braid.
#include "token_mean.h"

#include <vector>

namespace token_mean {

using braid::Tensor;
namespace parallel = braid::parallel;

namespace {

// Targets the loss counts (the ignored ones are -1).
int64_t counted_targets(const Tensor& targets) {
  int64_t n = 0;
  for (float t : targets.to_vector()) n += t >= 0;
  return n;
}

}  // namespace

void TokenMean::setup(braid::nn::Module& model, braid::optim::Optimizer& optimizer,
                      const braid::dist::ParallelGrid& grid) {
  BRAID_CHECK(grid.size("pp") == 1,
              "token_mean runs its own step loop, and a pipeline runs the step itself; use it "
              "with parallel.pp = 1 (here {})",
              grid.size("pp"));
  dp_ = grid.group("dp");
  // The weights count on the wrapped strategy averaging gradients over dp.
  const std::string over = inner_->name();
  BRAID_CHECK(dp_->size() == 1 || over == "ddp" || over == "zero1",
              "token_mean over {} with dp = {}: its weights need a strategy that averages "
              "gradients over dp (ddp or zero1)",
              over, dp_->size());
  StrategyWrapper::setup(model, optimizer, grid);
}

parallel::StepLoss TokenMean::forward_backward(const braid::nn::Gpt& model,
                                               const parallel::StepBatches& batches) {
  std::vector<braid::data::Batch> micro;
  std::vector<int64_t> counted;
  int64_t here = 0;
  for (int i = 0; i < batches.accumulate; ++i) {
    micro.push_back(batches.next());
    counted.push_back(counted_targets(micro.back().targets));
    // A micro-batch without a counted target has a loss of 0 / 0.
    BRAID_CHECK(counted.back() > 0, "token_mean: batch {} of step {} has no counted target", i,
                batches.step + 1);
    here += counted.back();
  }
  // Exact in f32 up to 2^24 tokens a step.
  Tensor total = Tensor::full({1}, static_cast<float>(here));
  dp_->all_reduce(total, braid::dist::ReduceOp::sum)->wait();
  const double scale = dp_->size() / static_cast<double>(total.item());

  parallel::StepLoss out;
  for (size_t i = 0; i < micro.size(); ++i) {
    const double weight = static_cast<double>(counted[i]) * scale;
    Tensor loss = model.loss(micro[i].inputs, micro[i].targets);
    out.loss += loss.item() * weight;
    out.tokens += micro[i].inputs.numel();
    begin_backward(i + 1 == micro.size());
    loss.backward(Tensor::full({}, static_cast<float>(weight)));
  }
  return out;
}

void register_token_mean() {
  parallel::register_strategy("token_mean", [](const parallel::StrategyOptions& o) {
    parallel::StrategyOptions rest = o;
    const auto over = rest.find("over");
    const std::string wrapped = over == rest.end() ? "ddp" : over->second;
    if (over != rest.end()) rest.erase(over);
    BRAID_CHECK(wrapped != "token_mean", "token_mean cannot wrap itself");
    // The wrapped strategy checks the remaining options (an unknown key is an error there).
    return std::make_unique<TokenMean>(parallel::make_strategy(wrapped, rest));
  });
}

}  // namespace token_mean
