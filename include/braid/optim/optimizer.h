// Optimizer interface, AdamW and SGD over dense f32 parameters.
//
// The gradient-clipping coefficient is passed into step() and applied inside the update
// kernel, so clipping costs no extra pass over the gradients.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/nn/module.h"

namespace braid::optim {

struct ParamEntry {
  std::string name;
  Tensor param;
  float weight_decay = 0.0f;
};

// GPT-style decay groups: parameters with >= 2 dims (matrices, embeddings) decay; biases and
// LayerNorm parameters do not.
std::vector<ParamEntry> decay_groups(const nn::NamedTensors& params, float weight_decay);

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamEntry> params);
  virtual ~Optimizer() = default;
  // One update with learning rate `lr`; every gradient is multiplied by grad_scale first.
  // Parameters without a gradient are left unchanged.
  virtual void step(float lr, float grad_scale = 1.0f) = 0;
  void zero_grad();
  int64_t steps_taken() const { return step_; }
  // Updates applied to parameter i (PyTorch counts per parameter: one without a gradient in
  // a step is not updated and its bias correction does not advance).
  int64_t param_steps(size_t i) const { return param_steps_.at(i); }
  const std::vector<ParamEntry>& params() const { return params_; }

  // Checkpointing: parameter i's state tensors by name ("exp_avg", "exp_avg_sq",
  // "momentum"), each shaped like the parameter; allocated (zeros) when not yet used, so a
  // loader can copy into them. Restoring the counters makes the next step continue exactly.
  virtual std::vector<std::pair<std::string, Tensor>> param_state(size_t i) { return {}; }
  void restore_steps(int64_t steps_taken, const std::vector<int64_t>& param_steps);
  // Counts one update that a strategy applied to every parameter itself (ZeRO-1 updates its
  // shards of them), so that steps_taken, param_steps and count_device_skips stay right.
  void count_step();

  // A device step (braid/ops/kernel_signatures.h: `record` and `state`, on the parameters'
  // device): from now on step() takes the gradient scale and the skip flag from `record`
  // instead of its grad_scale argument, so the host never waits for the device. A skipped step
  // changes nothing on the device, but the host counts it until count_device_skips says
  // otherwise. Undefined tensors go back to host-driven steps.
  void set_device_step(Tensor record, Tensor state);
  // The host has read state[kStateSkipped] == `skipped_total` (skips since set_device_step):
  // the update counts drop by the skips not yet counted. Exact when every parameter with a
  // gradient in a skipped step also has one in the other steps (true for a GPT).
  void count_device_skips(int64_t skipped_total);
  // The device step's record and state (undefined without one) and the skips already counted,
  // for a strategy that updates the optimizer's parameters itself (ZeRO-1).
  const Tensor& device_record() const { return device_record_; }
  const Tensor& device_state() const { return device_state_; }
  int64_t device_skips_counted() const { return device_skips_counted_; }

 protected:
  // True when `device` is the device step's (the parameters there take their scale from it).
  bool device_step_on(Device device) const {
    return device_record_.defined() && device_record_.device() == device;
  }
  Tensor device_record_, device_state_;
  int64_t device_skips_counted_ = 0;  // state[kStateSkipped] the counts already reflect
  std::vector<ParamEntry> params_;
  std::vector<int64_t> param_steps_;
  int64_t step_ = 0;
};

struct AdamWOptions {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
};

class AdamW : public Optimizer {
 public:
  // The moments are allocated at the first step, so a strategy that shards the optimizer
  // state (ZeRO-1) and never calls step() pays nothing for them.
  AdamW(std::vector<ParamEntry> params, AdamWOptions options);
  void step(float lr, float grad_scale = 1.0f) override;
  const AdamWOptions& options() const { return options_; }
  // Undefined before the first step.
  const Tensor& exp_avg(size_t i) const { return exp_avg_.at(i); }
  const Tensor& exp_avg_sq(size_t i) const { return exp_avg_sq_.at(i); }
  std::vector<std::pair<std::string, Tensor>> param_state(size_t i) override;
  // The device's table of bias corrections (AdamWGroupDeviceKernel), at least `steps` long.
  const Tensor& bias_table(Device device, int64_t steps);

 private:
  AdamWOptions options_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  Tensor bias_table_;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamEntry> params, float momentum);
  void step(float lr, float grad_scale = 1.0f) override;
  std::vector<std::pair<std::string, Tensor>> param_state(size_t i) override;

 private:
  float momentum_;
  std::vector<Tensor> buffers_;
};

// Builds "adamw" or "sgd" by name (error names the valid choices).
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<ParamEntry> params,
                                          AdamWOptions adamw, float momentum);

}  // namespace braid::optim
