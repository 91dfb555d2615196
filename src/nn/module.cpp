// Module tree walking: named parameters, state dicts and gradient zeroing.
#include "braid/nn/module.h"

#include <set>

#include "braid/autograd/grad_mode.h"
#include "braid/autograd/node.h"

namespace braid::nn {

Tensor& Module::register_parameter(std::string name, Tensor value, std::optional<ShardSpec> shard) {
  if (shard)
    BRAID_CHECK(shard->local_shape == value.shape(), "parameter '{}' is {} but its shard {} is {}",
                name, value.str(), shard->str(), shape_str(shard->local_shape));
  specs_.push_back(shard ? *shard : ShardSpec::whole(value.shape()));
  value.set_requires_grad(true);
  params_.emplace_back(std::move(name), std::move(value));
  return params_.back().second;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

void Module::collect_specs(const std::string& prefix, std::map<std::string, ShardSpec>& out) const {
  for (size_t i = 0; i < params_.size(); ++i) out.emplace(prefix + params_[i].first, specs_[i]);
  for (const auto& [name, child] : children_) child->collect_specs(prefix + name + ".", out);
}

std::map<std::string, ShardSpec> Module::shard_specs() const {
  std::map<std::string, ShardSpec> out;
  collect_specs("", out);
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

int64_t Module::num_global_parameters() const {
  int64_t n = 0;
  for (const auto& [name, spec] : shard_specs()) n += shape_numel(spec.global_shape);
  return n;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t);
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  autograd::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& [name, param] : named_parameters()) {
    auto it = state.find(name);
    if (it == state.end()) {
      BRAID_CHECK(!strict, "state dict has no tensor '{}' (the model expects it)", name);
      continue;
    }
    BRAID_CHECK(it->second.shape() == param.shape(),
                "tensor '{}' has shape {} in the state dict but {} in the model", name,
                shape_str(it->second.shape()), shape_str(param.shape()));
    Tensor dst = param.detach();
    dst.copy_(it->second);
    used.insert(name);
  }
  if (strict) {
    for (const auto& [name, t] : state)
      BRAID_CHECK(used.count(name), "state dict tensor '{}' matches no model parameter", name);
  }
}

void Module::to(Device device) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, param] : named_parameters()) {
    if (param.device() != device)
      param.rebind_(Tensor::empty(param.shape(), param.dtype(), device));
    Tensor grad = param.grad();
    if (grad.defined() && grad.device() != device)
      grad.rebind_(Tensor::empty(grad.shape(), grad.dtype(), device));
  }
}

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) autograd::zero_grad(t);
}

}  // namespace braid::nn
