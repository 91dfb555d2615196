// autograd::Node: one recorded operation of the tape, and the helper ops use to record one.
//
// A node receives the gradients of its outputs and returns the gradients of its inputs.
// Saved tensors live in the node until the engine has applied it, then are released at once
// so activations are freed during backward rather than at its end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::autograd {

class Node;

// Where an input's gradient goes: output slot `input_nr` of `node` (null: no gradient needed).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // grads[i] is the gradient of output i (undefined when that output did not reach the loss).
  // Returns one gradient per entry of next_edges (undefined where none flows).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees saved tensors; called by the engine right after apply.
  virtual void release_saved() {}

  // Creation order; later nodes run first, which is a valid reverse topological order.
  uint64_t sequence_nr() const { return sequence_nr_; }
  uint32_t num_outputs() const { return num_outputs_; }

  std::vector<Edge> next_edges;

 protected:
  uint32_t num_outputs_ = 1;

 private:
  uint64_t sequence_nr_;
};

// Gradient of all outputs -> gradients of all inputs, as a closure owning its saved tensors.
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

// True when an op on `inputs` must record history (grad mode on, some input requires grad).
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Records `backward` as the grad_fn of `outputs`, with one edge per entry of `inputs`.
// Undefined output gradients reaching a node with several outputs become zeros; when none
// of the outputs got a gradient the closure is not called and no gradient flows.
void record(std::string name, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs,
            BackwardFn backward);

// The edge that delivers a gradient to `t` (its grad_fn, or its leaf accumulator).
Edge gradient_edge(const Tensor& t);

// Called by a backward function: the `.grad` of leaf `t` when its gradient may be added
// straight into it (t requires grad, has a dense f32 `.grad` of its shape, and no recompute
// replay is capturing t's gradient); undefined otherwise. A backward that adds into it
// returns an undefined gradient for t, whose accumulator still fires the grad-ready hooks
// once every contribution is in. This spares a temporary and a pass over it per
// contribution: weight gradients written by GEMM with beta = 1, embedding rows added in place.
// With `overwrite`, a `.grad` that zero_grad left stale comes back unfilled and *overwrite is
// set: the caller then writes every element (a GEMM with beta = 0) instead of adding.
Tensor direct_grad(const Tensor& t, bool* overwrite = nullptr);

// zero_grad for one leaf. A `.grad` no one else holds (no other handle to it, no other tensor
// on its storage) is only marked stale: the first backward GEMM into it overwrites it, which
// spares a pass writing zeros over every gradient (2% of a GPT-2-small step on the CPU), and
// a read through Tensor::grad() before that fills the zeros. A `.grad` sharing its storage (a view
// into a data-parallel flat bucket, which collectives read as a whole) is zeroed now.
void zero_grad(const Tensor& leaf);

}  // namespace braid::autograd
