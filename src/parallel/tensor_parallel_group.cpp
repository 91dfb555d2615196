// TensorParallelGroup: nn::TensorParallel over the grid's tp process group.
#include "braid/parallel/tensor_parallel.h"

namespace braid::parallel {

TensorParallelGroup::TensorParallelGroup(dist::ProcessGroupPtr group, bool sequence_parallel)
    : group_(std::move(group)), sequence_parallel_(sequence_parallel) {
  BRAID_CHECK(group_ != nullptr, "tensor parallelism needs a process group");
}

nn::TensorParallelPtr TensorParallelGroup::from_grid(const dist::ParallelGrid& grid,
                                                     bool sequence_parallel) {
  if (!grid.has_axis("tp") || grid.size("tp") == 1) return nullptr;
  return std::make_shared<TensorParallelGroup>(grid.group("tp"), sequence_parallel);
}

Tensor TensorParallelGroup::copy_to_region(const Tensor& x) const {
  return parallel::copy_to_region(x, group_);
}
Tensor TensorParallelGroup::reduce_from_region(const Tensor& x) const {
  return parallel::reduce_from_region(x, group_);
}
Tensor TensorParallelGroup::scatter_to_region(const Tensor& x, int dim) const {
  return parallel::scatter_to_region(x, dim, group_);
}
Tensor TensorParallelGroup::gather_from_region(const Tensor& x, int dim) const {
  return parallel::gather_from_region(x, dim, group_);
}
Tensor TensorParallelGroup::gather_sequence(const Tensor& x, int dim) const {
  return parallel::gather_sequence(x, dim, group_);
}
Tensor TensorParallelGroup::reduce_scatter_sequence(const Tensor& x, int dim) const {
  return parallel::reduce_scatter_sequence(x, dim, group_);
}
Tensor TensorParallelGroup::vocab_parallel_cross_entropy(const Tensor& logits,
                                                         const Tensor& targets, int64_t vocab_begin,
                                                         int64_t num_classes,
                                                         int64_t ignore_index) const {
  return parallel::vocab_parallel_cross_entropy(logits, targets, vocab_begin, num_classes,
                                                ignore_index, group_);
}

}  // namespace braid::parallel
