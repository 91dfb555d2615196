// Module tree walking: named parameters, state dicts and gradient zeroing.
#include "braid/nn/module.h"

#include <set>

#include "braid/autograd/grad_mode.h"

namespace braid::nn {

Tensor& Module::register_parameter(std::string name, Tensor value) {
  value.set_requires_grad(true);
  params_.emplace_back(std::move(name), std::move(value));
  return params_.back().second;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
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

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) {
    Tensor g = t.grad();
    if (g.defined()) g.zero_();
  }
}

}  // namespace braid::nn
