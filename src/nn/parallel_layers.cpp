// Column-, row- and vocabulary-parallel layers over nn::TensorParallel.
#include "braid/nn/parallel_layers.h"

#include "braid/ops.h"
#include "braid/ops/host_checked.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"

namespace braid::nn {
namespace {

int ways(const TensorParallelPtr& tp) {
  return tp ? tp->size() : 1;
}
int piece(const TensorParallelPtr& tp) {
  return tp ? tp->rank() : 0;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features,
                                           TensorParallelPtr tp, bool with_bias, int64_t groups,
                                           bool gather_output)
    : tp_(std::move(tp)), gather_output_(gather_output) {
  // A gathered output of grouped features would interleave the groups rank by rank.
  BRAID_CHECK(!gather_output || groups == 1,
              "a column-parallel layer with {} feature groups cannot gather its output", groups);
  const auto w = ShardSpec::split_groups({out_features, in_features}, 0, static_cast<int>(groups),
                                         ways(tp_), piece(tp_));
  weight = register_parameter("weight", Tensor::zeros(w.local_shape), w);
  if (with_bias) {
    const auto b =
        ShardSpec::split_groups({out_features}, 0, static_cast<int>(groups), ways(tp_), piece(tp_));
    bias = register_parameter("bias", Tensor::zeros(b.local_shape), b);
  }
}

Tensor ColumnParallelLinear::forward(const Tensor& x) const {
  Tensor y = linear(enter_tensor_parallel(tp_.get(), x, x.dim() - 2), weight, bias);
  return tp_ && gather_output_ ? tp_->gather_from_region(y, -1) : y;
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features,
                                     TensorParallelPtr tp, bool with_bias, bool input_is_parallel)
    : tp_(std::move(tp)), input_is_parallel_(input_is_parallel) {
  const auto w = ShardSpec::split({out_features, in_features}, 1, ways(tp_), piece(tp_));
  weight = register_parameter("weight", Tensor::zeros(w.local_shape), w);
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

Tensor RowParallelLinear::forward(const Tensor& x) const {
  if (!tp_) return linear(x, weight, bias);
  const Tensor piece = input_is_parallel_ ? x : tp_->scatter_to_region(x, -1);
  // The bias joins after the sum over ranks, so it is added once.
  Tensor y = exit_tensor_parallel(tp_.get(), linear(piece, weight), x.dim() - 2);
  return bias.defined() ? add(y, replicated_parameter(tp_.get(), bias)) : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num_embeddings, int64_t dim,
                                               TensorParallelPtr tp)
    : tp_(std::move(tp)) {
  const auto w = ShardSpec::split({num_embeddings, dim}, 0, ways(tp_), piece(tp_));
  weight = register_parameter("weight", Tensor::zeros(w.local_shape), w);
  vocab_begin_ = w.offsets[0];
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) const {
  if (!tp_) return embedding(weight, ids);
  const int64_t rows = weight.size(0);
  ops::check_ids_in_range(ids, rows * tp_->size(), "embedding's vocabulary");
  // Ids outside this rank's rows look up row 0 and are masked to zero; the sum over ranks
  // then holds exactly one row per id. Mapped on the weight's device.
  const ops::OpDevice on("vocab-parallel embedding", {{"weight", weight}, {"ids", ids}});
  const Tensor dense = ids.contiguous();
  Tensor local = on.empty(ids.shape(), DType::i32);
  Tensor mask = on.empty(ids.shape());
  ops::kernel<ops::VocabShardIdsKernel>(on.device())(dense, vocab_begin_, rows, local, mask);
  // What the mapping guarantees, so that the embedding does not read the local ids back.
  if (!on.is_cpu()) ops::mark_host_checked(local, {0, static_cast<int32_t>(rows - 1), 0});
  Shape mask_shape = ids.shape();
  mask_shape.push_back(1);
  const Tensor partial = mul(embedding(weight, local), mask.reshape(mask_shape));
  return exit_tensor_parallel(tp_.get(), partial, partial.dim() - 2);
}

}  // namespace braid::nn
