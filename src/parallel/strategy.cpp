// Strategy defaults, the name -> factory registry and option parsing.
#include "braid/parallel/strategy.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/parallel/data_parallel.h"

namespace braid::parallel {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, StrategyFactory> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    // The library's own strategies.
    reg->factories["none"] = [](const StrategyOptions& o) {
      OptionReader(o, "none").finish();
      return std::make_unique<SingleProcess>();
    };
    reg->factories["ddp"] = [](const StrategyOptions& o) {
      return std::make_unique<DataParallel>(DataParallelOptions::parse(o, false));
    };
    reg->factories["zero1"] = [](const StrategyOptions& o) {
      return std::make_unique<DataParallel>(DataParallelOptions::parse(o, true));
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void Strategy::setup(nn::Module& model, optim::Optimizer& optimizer,
                     const dist::ParallelGrid& grid) {
  model_ = &model;
  optimizer_ = &optimizer;
  grid_ = &grid;
}

void SingleProcess::setup(nn::Module& model, optim::Optimizer& optimizer,
                          const dist::ParallelGrid& grid) {
  Strategy::setup(model, optimizer, grid);
  ready_squares_ = std::make_unique<optim::ReadyGradSquares>(model.parameters());
}

void SingleProcess::begin_backward(bool last_micro_step) {
  if (ready_squares_) ready_squares_->begin_backward(last_micro_step);
}

GradSquares grad_squares(const nn::Module& model, const std::vector<SharedParameter>& shared,
                         const optim::ReadyGradSquares* ready) {
  const std::map<std::string, nn::ShardSpec> shards = model.shard_specs();
  GradSquares squares;
  for (const auto& [name, param] : model.named_parameters()) {
    const Tensor g = param.grad();
    if (!g.defined()) continue;
    const SharedParameter* copy = find_shared(shared, param);
    if (copy && !copy->counted) continue;
    (shards.at(name).is_whole() ? squares.replicated : squares.sharded) +=
        optim::grad_sum_of_squares(param, copy ? nullptr : ready);
  }
  return squares;
}

double global_grad_norm(const GradSquares& squares, const dist::ParallelGrid& grid) {
  double sharded = squares.sharded;
  if (grid.has_axis("tp") && grid.size("tp") > 1) {
    Tensor total = Tensor::full({1}, static_cast<float>(sharded));
    grid.group("tp")->all_reduce(total, dist::ReduceOp::sum)->wait();
    sharded = total.item();
  }
  double total = sharded + squares.replicated;
  if (grid.has_axis("pp") && grid.size("pp") > 1) {
    Tensor stages = Tensor::full({1}, static_cast<float>(total));
    grid.group("pp")->all_reduce(stages, dist::ReduceOp::sum)->wait();
    total = stages.item();
  }
  return std::sqrt(total);
}

optim::ClipResult clip_from_device_squares(Tensor squares, const dist::ParallelGrid& grid,
                                           float max_norm) {
  const Device device = squares.device();
  BRAID_CHECK(!device.is_cpu() && squares.dtype() == DType::f32 && squares.numel() == 2,
              "clip_from_device_squares: squares {} on {} must be f32[2] on a device",
              squares.str(), device.str());
  if (grid.has_axis("tp") && grid.size("tp") > 1) {
    Tensor sharded = squares.narrow(0, 0, 1);
    grid.group_for("tp", device)->all_reduce(sharded, dist::ReduceOp::sum)->wait();
  }
  // Every stage's parts summed over pp: ClipFromSquaresKernel adds the two, so this is the
  // host's sum of (tp-summed sharded + replicated) over the stages.
  if (grid.has_axis("pp") && grid.size("pp") > 1)
    grid.group_for("pp", device)->all_reduce(squares, dist::ReduceOp::sum)->wait();
  optim::ClipResult out{std::nan(""), 1.0f, Tensor::empty({2}, DType::f32, device)};
  ops::kernel<ops::ClipFromSquaresKernel>(device)(squares, max_norm, out.device);
  return out;
}

optim::ClipResult Strategy::clip(float max_norm) {
  const std::vector<optim::ParamEntry>& entries = optimizer_->params();
  if (!entries.empty() && !entries.front().param.device().is_cpu()) {
    // On a device the norm stays there (ClipResult::device). One rank's gradients are the whole
    // norm in one pass; over tp its sharded and replicated parts are summed apart, as on the host.
    const int tp = grid_->has_axis("tp") ? grid_->size("tp") : 1;
    const int pp = grid_->has_axis("pp") ? grid_->size("pp") : 1;
    const Device device = entries.front().param.device();
    const bool whole = tp == 1 && pp == 1;
    const std::map<std::string, nn::ShardSpec> shards =
        whole ? std::map<std::string, nn::ShardSpec>{} : model_->shard_specs();
    std::vector<Tensor> grads, sharded, replicated;
    for (const auto& [name, p] : model_->named_parameters()) {
      const Tensor g = p.grad();
      const SharedParameter* copy = find_shared(shared_, p);
      if (!g.defined() || (copy && !copy->counted)) continue;
      BRAID_CHECK(g.device() == device && g.dtype() == DType::f32,
                  "gradient clipping on {}: gradient of {} ({}) is not f32 there", device.str(),
                  name, g.str());
      grads.push_back(g.contiguous());
      if (!whole) (shards.at(name).is_whole() ? replicated : sharded).push_back(grads.back());
    }
    BRAID_CHECK(!grads.empty(), "gradient clipping found no gradient on {}", device.str());
    if (whole) return optim::clip_on_device(grads, max_norm);
    Tensor squares = Tensor::empty({2}, DType::f32, device);
    Tensor sharded_squares = squares.narrow(0, 0, 1), replicated_squares = squares.narrow(0, 1, 1);
    ops::kernel<ops::GradSquaresKernel>(device)(sharded, sharded_squares);
    ops::kernel<ops::GradSquaresKernel>(device)(replicated, replicated_squares);
    return clip_from_device_squares(squares, *grid_, max_norm);
  }
  return optim::clip_for_norm(
      global_grad_norm(grad_squares(*model_, shared_, ready_squares_.get()), *grid_), max_norm);
}

void Strategy::sum_shared_gradients() {
  for (SharedParameter& s : shared_) {
    Tensor g = s.param.grad();
    BRAID_CHECK(g.defined(), "shared parameter '{}' got no gradient in this step", s.param.name());
    s.group->all_reduce(g, dist::ReduceOp::sum)->wait();
  }
}

const SharedParameter* find_shared(const std::vector<SharedParameter>& shared,
                                   const Tensor& param) {
  for (const SharedParameter& s : shared)
    if (s.param.same(param)) return &s;
  return nullptr;
}

bool Strategy::is_shared(const Tensor& param) const {
  return find_shared(shared_, param) != nullptr;
}

optim::OwnedState Strategy::owned_state(optim::Optimizer& optimizer) {
  return optim::whole_parameters(optimizer);
}

void Strategy::step(float lr, float grad_scale) {
  optimizer_->step(lr, grad_scale);
}

void register_strategy(const std::string& name, StrategyFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  BRAID_CHECK(!r.factories.count(name), "a strategy named '{}' is already registered", name);
  r.factories[name] = std::move(factory);
}

std::vector<std::string> registered_strategies() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyOptions& options) {
  StrategyFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const auto& n : registered_strategies()) known += (known.empty() ? "" : ", ") + n;
    BRAID_FAIL("unknown parallel strategy '{}' (registered: {})", name, known);
  }
  return factory(options);
}

double OptionReader::number(const std::string& key, double fallback) {
  used_.push_back(key);
  auto it = options_.find(key);
  if (it == options_.end()) return fallback;
  try {
    size_t end = 0;
    const double v = std::stod(it->second, &end);
    if (end == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  BRAID_FAIL("strategy {} option {}='{}' is not a number", strategy_, key, it->second);
}

bool OptionReader::flag(const std::string& key, bool fallback) {
  used_.push_back(key);
  auto it = options_.find(key);
  if (it == options_.end()) return fallback;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0") return false;
  BRAID_FAIL("strategy {} option {}='{}' is not true or false", strategy_, key, it->second);
}

void OptionReader::finish() const {
  for (const auto& [key, value] : options_) {
    if (std::find(used_.begin(), used_.end(), key) != used_.end()) continue;
    std::string known;
    for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
    BRAID_FAIL("strategy {} has no option '{}' (options: {})", strategy_, key,
               known.empty() ? "none" : known);
  }
}

}  // namespace braid::parallel
