// Tensor-parallel layers (Megatron-style). Each holds only its shard of the single-process
// parameter of the same name, generated from global indices (nn/init.h, nn/shard_spec.h).
// With a null TensorParallel they are the plain layers.
//
// Activations are [..., S, F]: the dim before the features is the sequence, the one that
// sequence parallelism shards.
#pragma once

#include "braid/nn/module.h"
#include "braid/nn/tensor_parallel.h"

namespace braid::nn {

// y = x W^T + b with W [out, in] split by output rows: each rank computes out/tp features.
// The input enters the region whole (or is gathered along the sequence under sequence
// parallelism). `groups` > 1 splits each of that many equal row blocks separately (a fused
// [q | k | v] weight: every rank owns the same heads of q, k and v). With `gather_output`
// every rank gets all out features (all-gathered; one group only).
class ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, TensorParallelPtr tp,
                       bool bias = true, int64_t groups = 1, bool gather_output = false);
  Tensor forward(const Tensor& x) const;  // [..., in] -> [..., out / tp] (or [..., out])
  Tensor weight, bias;                    // [out / tp, in], [out / tp]

 private:
  TensorParallelPtr tp_;
  bool gather_output_;
};

// y = x W^T + b with W [out, in] split by input columns: the input is already split over the
// features (a column-parallel layer's output); partial products are summed over the group
// (reduce-scattered along the sequence under sequence parallelism), then the bias is added.
// With input_is_parallel = false the layer takes the whole input and keeps its own piece.
class RowParallelLinear : public Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, TensorParallelPtr tp,
                    bool bias = true, bool input_is_parallel = true);
  Tensor forward(const Tensor& x) const;  // [..., in / tp] (or [..., in]) -> [..., out]
  Tensor weight, bias;                    // [out, in / tp], [out] (replicated)

 private:
  TensorParallelPtr tp_;
  bool input_is_parallel_;
};

// Embedding rows split over the group: each rank looks up the ids in its rows, zero
// elsewhere, and the pieces are summed over the group (reduce-scattered along the sequence
// under sequence parallelism).
class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(int64_t num_embeddings, int64_t dim, TensorParallelPtr tp);
  Tensor forward(const Tensor& ids) const;  // [..., S] -> [..., S (/ tp), dim]
  int64_t vocab_begin() const { return vocab_begin_; }
  Tensor weight;  // [num_embeddings / tp, dim]

 private:
  TensorParallelPtr tp_;
  int64_t vocab_begin_ = 0;
};

}  // namespace braid::nn
