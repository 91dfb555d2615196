// AdamW and SGD: state allocation and per-parameter dispatch to the update kernels.
#include "braid/optim/optimizer.h"

#include "braid/autograd/grad_mode.h"
#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid::optim {

std::vector<ParamEntry> decay_groups(const nn::NamedTensors& params, float weight_decay) {
  std::vector<ParamEntry> out;
  for (const auto& [name, t] : params) out.push_back({name, t, t.dim() >= 2 ? weight_decay : 0.0f});
  return out;
}

Optimizer::Optimizer(std::vector<ParamEntry> params)
    : params_(std::move(params)), param_steps_(params_.size(), 0) {
  for (const auto& e : params_)
    BRAID_CHECK(e.param.dtype() == DType::f32 && e.param.is_contiguous(),
                "optimizer parameter '{}' must be dense f32, got {}", e.name, e.param.str());
}

void Optimizer::zero_grad() {
  for (auto& e : params_) autograd::zero_grad(e.param);
}

AdamW::AdamW(std::vector<ParamEntry> params, AdamWOptions options)
    : Optimizer(std::move(params)),
      options_(options),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()) {}

void Optimizer::restore_steps(int64_t steps_taken, const std::vector<int64_t>& param_steps) {
  BRAID_CHECK(param_steps.size() == params_.size(),
              "optimizer state for {} parameters restored into an optimizer of {}",
              param_steps.size(), params_.size());
  step_ = steps_taken;
  param_steps_ = param_steps;
}

std::vector<std::pair<std::string, Tensor>> AdamW::param_state(size_t i) {
  const Tensor& p = params_.at(i).param;
  if (!exp_avg_[i].defined()) {
    exp_avg_[i] = Tensor::zeros(p.shape(), DType::f32, p.device());
    exp_avg_sq_[i] = Tensor::zeros(p.shape(), DType::f32, p.device());
  }
  return {{"exp_avg", exp_avg_[i]}, {"exp_avg_sq", exp_avg_sq_[i]}};
}

std::vector<std::pair<std::string, Tensor>> Sgd::param_state(size_t i) {
  if (!buffers_.at(i).defined()) return {};
  return {{"momentum", buffers_[i]}};
}

void AdamW::step(float lr, float grad_scale) {
  autograd::NoGradGuard no_grad;
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (exp_avg_[i].defined()) continue;
    const Tensor& p = params_[i].param;
    exp_avg_[i] = Tensor::zeros(p.shape(), DType::f32, p.device());
    exp_avg_sq_[i] = Tensor::zeros(p.shape(), DType::f32, p.device());
  }
  // Gathered first and updated in one call per device (AdamWGroupKernel), in parameter order.
  std::vector<Tensor> values, grads;
  values.reserve(params_.size());
  grads.reserve(params_.size());
  std::vector<ops::AdamWUpdate> updates;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].param.grad();
    if (!grad.defined()) continue;
    values.push_back(params_[i].param.detach());
    grads.push_back(grad.contiguous());
    updates.push_back({&values.back(), &grads.back(), &exp_avg_[i], &exp_avg_sq_[i],
                       ops::AdamWHyper{lr, options_.beta1, options_.beta2, options_.eps,
                                       params_[i].weight_decay, ++param_steps_[i]}});
  }
  for (size_t begin = 0; begin < updates.size();) {
    const Device device = updates[begin].param->device();
    size_t end = begin + 1;
    while (end < updates.size() && updates[end].param->device() == device) ++end;
    ops::kernel<ops::AdamWGroupKernel>(device)(
        std::span<const ops::AdamWUpdate>(updates).subspan(begin, end - begin), grad_scale);
    begin = end;
  }
}

Sgd::Sgd(std::vector<ParamEntry> params, float momentum)
    : Optimizer(std::move(params)), momentum_(momentum) {
  for (const auto& e : params_)
    buffers_.push_back(momentum_ != 0.0f
                           ? Tensor::zeros(e.param.shape(), DType::f32, e.param.device())
                           : Tensor());
}

void Sgd::step(float lr, float grad_scale) {
  autograd::NoGradGuard no_grad;
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].param.grad();
    if (!grad.defined()) continue;
    Tensor p = params_[i].param.detach();
    ops::kernel<ops::SgdKernel>(p.device())(p, grad.contiguous(), buffers_[i], lr, momentum_,
                                            params_[i].weight_decay, grad_scale,
                                            ++param_steps_[i] == 1);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<ParamEntry> params,
                                          AdamWOptions adamw, float momentum) {
  if (name == "adamw") return std::make_unique<AdamW>(std::move(params), adamw);
  if (name == "sgd") return std::make_unique<Sgd>(std::move(params), momentum);
  BRAID_FAIL("unknown optimizer '{}' (expected adamw or sgd)", name);
}

}  // namespace braid::optim
