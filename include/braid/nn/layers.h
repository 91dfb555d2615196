// The basic layers: Linear, Embedding, LayerNorm. Parameters are created uninitialised;
// the owning model initialises them by name (see nn/init.h).
#pragma once

#include "braid/nn/module.h"
#include "braid/nn/tensor_parallel.h"

namespace braid::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // weight [out, in]; bias [out] or undefined
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;  // [num_embeddings, dim]
};

// Under sequence parallelism (a `tp` that says so) each rank normalises its piece of the
// sequence; weight and bias stay replicated and their gradients are summed over the group.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f, TensorParallelPtr tp = nullptr);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  float eps;

 private:
  TensorParallelPtr tp_;
};

}  // namespace braid::nn
