// The owned state of an optimizer that updates whole parameters.
#include "braid/optim/owned_state.h"

namespace braid::optim {

OwnedState whole_parameters(Optimizer& optimizer) {
  OwnedState out;
  out.steps_taken = optimizer.steps_taken();
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    const ParamEntry& e = optimizer.params()[i];
    const int64_t n = e.param.numel();
    StateShard s;
    s.name = e.name;
    s.param = i;
    s.length = n;
    s.value = e.param.detach().reshape({n});
    for (auto& [name, t] : optimizer.param_state(i)) s.state.emplace_back(name, t.reshape({n}));
    const Tensor g = e.param.grad();
    if (g.defined()) s.grad = g.reshape({n});
    s.weight_decay = e.weight_decay;
    s.steps = optimizer.param_steps(i);
    out.shards.push_back(std::move(s));
  }
  return out;
}

}  // namespace braid::optim
