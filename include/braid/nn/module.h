// nn::Module: a tree of named parameters and child modules with stable dotted names.
//
// Names such as "blocks.3.attn.qkv.weight" are the contract used by checkpoints, exports
// and the PyTorch parity fixture, so they never depend on the parallel layout.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/nn/shard_spec.h"

namespace braid::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  // Every parameter of this module and its children, depth first, registration order.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  int64_t num_parameters() const;  // held by this module (on this rank)
  // Elements of the single-process parameters this module's shards belong to: the model's
  // size whatever the tensor-parallel layout.
  int64_t num_global_parameters() const;

  // Name -> tensor (shares storage with the parameters).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in; with `strict`, a missing or unexpected name or a shape mismatch throws
  // naming the tensor.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

  // Where each parameter sits in the single-process parameter of the same name (whole for
  // parameters that are not sharded). Checkpoints and resharding read this.
  std::map<std::string, ShardSpec> shard_specs() const;

  // Sets every existing gradient to zero in place (buffers stay, so views into flat
  // gradient buckets stay valid); the fill may be deferred to the first read or overwritten
  // by the next backward (autograd::zero_grad).
  void zero_grad();

  // Moves every parameter, and every gradient it has, to `device` in place: each handle of a
  // parameter (the optimizer's, a layer's member, the caller's) sees the new memory, as
  // Tensor::rebind_ moves parameters into flat buffers. Values are copied exactly. Tensors
  // already there are left alone. Call it before building the optimizer and the strategy, so
  // that their state (created on each parameter's device) lands there too.
  void to(Device device);

 protected:
  // `shard`: the slice of the global parameter `value` holds (none: all of it).
  Tensor& register_parameter(std::string name, Tensor value,
                             std::optional<ShardSpec> shard = std::nullopt);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    children_.emplace_back(std::move(name), module);
    return module;
  }

 private:
  void collect(const std::string& prefix, NamedTensors& out) const;
  void collect_specs(const std::string& prefix, std::map<std::string, ShardSpec>& out) const;
  NamedTensors params_;
  std::vector<ShardSpec> specs_;  // one per entry of params_
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace braid::nn
