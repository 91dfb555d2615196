// The backward engine: runs the tape in reverse topological order with dependency counts.
#pragma once

#include <functional>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::autograd {

// Propagates `grads` (undefined entries mean ones, for scalar roots) from `roots` to every
// leaf that requires grad, accumulating into leaf `.grad` and firing each leaf's grad-ready
// hooks once its gradient for this pass is final. Saved tensors are freed as nodes finish.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads);

// Activation checkpointing: runs fn without recording history, keeps only `inputs`, and
// re-runs fn with history during backward to obtain the gradients. fn must be deterministic.
// Parameters that fn uses receive their gradients (and fire their hooks) during that re-run.
using RecomputeFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<Tensor> recompute(const RecomputeFn& fn, const std::vector<Tensor>& inputs);

}  // namespace braid::autograd
