// Recompute's bookkeeping: which parameters a segment touches, and a way for its replayed
// backward to hand their gradients back to the outer pass instead of accumulating them.
//
// Without this, a parameter used both inside a recompute segment and outside it would fire
// its grad-ready hook during the replay with only part of its gradient.
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::autograd {

// Active while a segment runs forward without history: ops report their inputs here
// (through needs_grad), and the leaves that require grad are kept.
struct LeafRecorder {
  LeafRecorder* enclosing = nullptr;
  std::vector<Tensor> leaves;
  std::unordered_set<const TensorImpl*> seen;

  void note(const Tensor& t) {
    if (t.defined() && t.requires_grad() && t.is_leaf() && seen.insert(t.impl()).second)
      leaves.push_back(t);
  }
};

// Active while a segment's replay runs its backward: gradients of these leaves are summed
// here, and their hooks do not fire (the outer pass delivers the sum and fires them once).
struct GradCapture {
  GradCapture* enclosing = nullptr;
  std::unordered_map<const TensorImpl*, Tensor> grads;
};

LeafRecorder*& current_leaf_recorder();
GradCapture*& current_grad_capture();

}  // namespace braid::autograd
