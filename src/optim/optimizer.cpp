// AdamW and SGD: state allocation and per-parameter dispatch to the update kernels.
#include "braid/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

void Optimizer::count_step() {
  ++step_;
  for (int64_t& s : param_steps_) ++s;
}

void Optimizer::set_device_step(Tensor record, Tensor state) {
  BRAID_CHECK(record.defined() == state.defined(),
              "set_device_step needs both the record and the state, or neither");
  if (record.defined())
    BRAID_CHECK(record.numel() == ops::kStepRecord && state.numel() == ops::kStepState &&
                    record.device() == state.device() && record.dtype() == DType::f32 &&
                    state.dtype() == DType::f32,
                "set_device_step: record {} on {} and state {} on {} must be f32[{}] and f32[{}] "
                "on one device",
                record.str(), record.device().str(), state.str(), state.device().str(),
                ops::kStepRecord, ops::kStepState);
  if (!state.same(device_state_)) device_skips_counted_ = 0;
  device_record_ = std::move(record);
  device_state_ = std::move(state);
}

void Optimizer::count_device_skips(int64_t skipped_total) {
  const int64_t fresh = skipped_total - device_skips_counted_;
  BRAID_CHECK(fresh >= 0 && fresh <= step_,
              "count_device_skips: {} skips reported after {} were counted, in {} steps",
              skipped_total, device_skips_counted_, step_);
  step_ -= fresh;
  for (int64_t& s : param_steps_) s = std::max<int64_t>(s - fresh, 0);
  device_skips_counted_ = skipped_total;
}

const Tensor& AdamW::bias_table(Device device, int64_t steps) {
  const int64_t have = bias_table_.defined() ? bias_table_.numel() / 2 : 0;
  if (have >= steps && bias_table_.device() == device) return bias_table_;
  // Grown by doubling, so a run rebuilds it a logarithmic number of times.
  const int64_t size = std::max<int64_t>({steps, 2 * have, 1024});
  Tensor host = Tensor::empty({2 * size}, DType::i64);
  std::vector<double> values(2 * size);
  for (int64_t s = 1; s <= size; ++s) {
    // As the AdamW kernels compute them (src/ops/cpu/optimizers.cpp, adamw_scalars).
    values[2 * (s - 1)] =
        1.0 - std::pow(static_cast<double>(options_.beta1), static_cast<double>(s));
    values[2 * (s - 1) + 1] =
        1.0 - std::pow(static_cast<double>(options_.beta2), static_cast<double>(s));
  }
  std::memcpy(host.data<int64_t>(), values.data(), values.size() * sizeof(double));
  bias_table_ = host.to(device);
  return bias_table_;
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
    const auto group = std::span<const ops::AdamWUpdate>(updates).subspan(begin, end - begin);
    if (device_step_on(device)) {
      int64_t last = 1;
      for (const ops::AdamWUpdate& u : group) last = std::max(last, u.hyper.step);
      ops::kernel<ops::AdamWGroupDeviceKernel>(device)(
          group, device_record_, device_state_, bias_table(device, last), device_skips_counted_);
    } else {
      ops::kernel<ops::AdamWGroupKernel>(device)(group, grad_scale);
    }
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
  if (device_record_.defined()) {
    // SGD has no device-scaled kernel: the scale and skip flag come over (one wait per step).
    // A skip still counts here, as under AdamW, until count_device_skips.
    const std::vector<float> record = device_record_.to_vector();
    if (record[ops::kRecordSkip] != 0.0f) {
      for (size_t i = 0; i < params_.size(); ++i)
        if (params_[i].param.grad().defined()) ++param_steps_[i];
      return;
    }
    grad_scale = record[ops::kRecordScale];
  }
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
