// The sink node of a leaf tensor: adds the incoming gradient into `.grad`, then fires hooks.
#pragma once

#include "braid/autograd/node.h"

namespace braid::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;

 private:
  Tensor leaf_;
};

}  // namespace braid::autograd
