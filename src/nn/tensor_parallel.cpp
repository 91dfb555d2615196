// The region entry/exit rules shared by the parallel layers and the GPT model, and the
// layout-only rank's refusal.
#include "braid/nn/tensor_parallel.h"

#include "braid/core/error.h"

namespace braid::nn {

Tensor enter_tensor_parallel(const TensorParallel* tp, const Tensor& x, int seq_dim) {
  if (!tp) return x;
  return tp->sequence_parallel() ? tp->gather_sequence(x, seq_dim) : tp->copy_to_region(x);
}

Tensor exit_tensor_parallel(const TensorParallel* tp, const Tensor& x, int seq_dim) {
  if (!tp) return x;
  return tp->sequence_parallel() ? tp->reduce_scatter_sequence(x, seq_dim)
                                 : tp->reduce_from_region(x);
}

void LayoutOnlyTensorParallel::refuse() {
  BRAID_FAIL(
      "this model was built with a layout-only tensor-parallel rank (to describe which slices "
      "it holds); it cannot run");
}

Tensor replicated_parameter(const TensorParallel* tp, const Tensor& param) {
  return tp && tp->sequence_parallel() ? tp->copy_to_region(param) : param;
}

}  // namespace braid::nn
