// Tensor parallelism over a process group: the differentiable region collectives, the
// vocabulary-parallel cross-entropy, and TensorParallelGroup, which offers them to models as
// an nn::TensorParallel.
//
// Each function is collective over `group` (every rank calls it in the same order, on
// tensors of the same shape) and waits for its communication, forward and backward. Pieces
// along a dim are equal: the dim's size must divide by the group size.
#pragma once

#include "braid/dist/parallel_grid.h"
#include "braid/nn/tensor_parallel.h"

namespace braid::parallel {

using dist::ProcessGroupPtr;

// Forward | backward, as in nn/tensor_parallel.h.
// The closures recorded for the backward keep `group` alive.
Tensor copy_to_region(const Tensor& x, const ProcessGroupPtr& group);      // identity | all-reduce
Tensor reduce_from_region(const Tensor& x, const ProcessGroupPtr& group);  // all-reduce | identity
// My piece of dim | all-gather along dim.
Tensor scatter_to_region(const Tensor& x, int dim, const ProcessGroupPtr& group);
// All-gather along dim | my piece of the gradient.
Tensor gather_from_region(const Tensor& x, int dim, const ProcessGroupPtr& group);
// All-gather along dim | reduce-scatter of the gradient along dim.
Tensor gather_sequence(const Tensor& x, int dim, const ProcessGroupPtr& group);
// Reduce-scatter along dim | all-gather of the gradient along dim.
Tensor reduce_scatter_sequence(const Tensor& x, int dim, const ProcessGroupPtr& group);

// Mean cross-entropy over the non-ignored targets (i32, global class ids) of logits split over
// the vocabulary: `logits` [..., Vs] holds columns [vocab_begin, vocab_begin + Vs) and columns
// >= num_classes are padding. Communicates 3 floats per row; never gathers the logits.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    int64_t vocab_begin, int64_t num_classes, int64_t ignore_index,
                                    const ProcessGroupPtr& group);

// The tp axis of a grid as a model sees it.
class TensorParallelGroup final : public nn::TensorParallel {
 public:
  TensorParallelGroup(dist::ProcessGroupPtr group, bool sequence_parallel);
  // The grid's "tp" group; null when tp = 1 (a model then runs unsharded).
  static nn::TensorParallelPtr from_grid(const dist::ParallelGrid& grid, bool sequence_parallel);

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  bool sequence_parallel() const override { return sequence_parallel_; }
  const dist::ProcessGroupPtr& group() const { return group_; }

  Tensor copy_to_region(const Tensor& x) const override;
  Tensor reduce_from_region(const Tensor& x) const override;
  Tensor scatter_to_region(const Tensor& x, int dim) const override;
  Tensor gather_from_region(const Tensor& x, int dim) const override;
  Tensor gather_sequence(const Tensor& x, int dim) const override;
  Tensor reduce_scatter_sequence(const Tensor& x, int dim) const override;
  Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                      int64_t vocab_begin, int64_t num_classes,
                                      int64_t ignore_index) const override;

 private:
  dist::ProcessGroupPtr group_;
  bool sequence_parallel_;
};

}  // namespace braid::parallel
