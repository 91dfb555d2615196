// nn::TensorParallel: what a tensor-parallel model needs from its group of ranks.
//
// nn sits above dist in the layer order, so it declares the operations it needs and the
// parallel layer implements them over a process group (parallel/tensor_parallel.h). A model
// built with a null TensorParallel is the single-process model. Every method is collective
// over the group: all ranks call the same methods in the same order (see dist::ProcessGroup).
//
// The region operations are the differentiable boundaries of Megatron-style tensor
// parallelism; each pairs a forward collective with its adjoint in the backward pass:
//
//   copy_to_region           identity            | all-reduce (sum) of the gradient
//   reduce_from_region       all-reduce (sum)    | identity
//   scatter_to_region(d)     keep my piece of d  | all-gather along d
//   gather_from_region(d)    all-gather along d  | keep my piece of d
//   gather_sequence(d)       all-gather along d  | reduce-scatter along d   (sequence parallel)
//   reduce_scatter_sequence  reduce-scatter on d | all-gather along d       (sequence parallel)
#pragma once

#include <memory>

#include "braid/core/tensor.h"

namespace braid::nn {

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sequence parallelism: LayerNorm and residual regions hold 1/size of the sequence.
  virtual bool sequence_parallel() const = 0;

  virtual Tensor copy_to_region(const Tensor& x) const = 0;
  virtual Tensor reduce_from_region(const Tensor& x) const = 0;
  virtual Tensor scatter_to_region(const Tensor& x, int dim) const = 0;
  virtual Tensor gather_from_region(const Tensor& x, int dim) const = 0;
  virtual Tensor gather_sequence(const Tensor& x, int dim) const = 0;
  virtual Tensor reduce_scatter_sequence(const Tensor& x, int dim) const = 0;

  // Mean cross-entropy over the targets that are not ignore_index, where `logits` [..., Vs]
  // holds vocabulary columns [vocab_begin, vocab_begin + Vs) of each rank's piece and
  // columns >= num_classes are padding. Never gathers the full logits.
  virtual Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                              int64_t vocab_begin, int64_t num_classes,
                                              int64_t ignore_index = -1) const = 0;
};

using TensorParallelPtr = std::shared_ptr<const TensorParallel>;

// Tensor-parallel rank `rank` of `size` that only lays a model out: a model built with it knows
// which slice of each parameter it holds (to load, convert or compare checkpoints), and any
// region operation throws, since nothing may run on it.
class LayoutOnlyTensorParallel final : public TensorParallel {
 public:
  LayoutOnlyTensorParallel(int rank, int size, bool sequence_parallel = false)
      : rank_(rank), size_(size), sequence_parallel_(sequence_parallel) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool sequence_parallel() const override { return sequence_parallel_; }
  Tensor copy_to_region(const Tensor&) const override { refuse(); }
  Tensor reduce_from_region(const Tensor&) const override { refuse(); }
  Tensor scatter_to_region(const Tensor&, int) const override { refuse(); }
  Tensor gather_from_region(const Tensor&, int) const override { refuse(); }
  Tensor gather_sequence(const Tensor&, int) const override { refuse(); }
  Tensor reduce_scatter_sequence(const Tensor&, int) const override { refuse(); }
  Tensor vocab_parallel_cross_entropy(const Tensor&, const Tensor&, int64_t, int64_t,
                                      int64_t) const override {
    refuse();
  }

 private:
  [[noreturn]] static void refuse();
  int rank_, size_;
  bool sequence_parallel_;
};

// The region entry of a column-parallel layer: the sequence all-gather under sequence
// parallelism, else copy_to_region. Identity without tensor parallelism.
Tensor enter_tensor_parallel(const TensorParallel* tp, const Tensor& x, int seq_dim);
// The region exit of a row-parallel layer: reduce-scatter along the sequence under sequence
// parallelism, else reduce_from_region. Identity without tensor parallelism.
Tensor exit_tensor_parallel(const TensorParallel* tp, const Tensor& x, int seq_dim);
// A replicated parameter used inside a sequence-sharded region: its gradient is a partial
// sum on each rank, so it enters through copy_to_region (gradient all-reduced during the
// backward, before any accumulation or data-parallel reduction sees it).
Tensor replicated_parameter(const TensorParallel* tp, const Tensor& param);

}  // namespace braid::nn
