// Linear, Embedding and LayerNorm modules over the functional ops.
#include "braid/nn/layers.h"

#include "braid/ops.h"

namespace braid::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  weight = register_parameter("weight", Tensor::zeros({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

Tensor Linear::forward(const Tensor& x) const {
  return linear(x, weight, bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim) {
  weight = register_parameter("weight", Tensor::zeros({num_embeddings, dim}));
}

Tensor Embedding::forward(const Tensor& ids) const {
  return embedding(weight, ids);
}

LayerNorm::LayerNorm(int64_t dim, float eps_, TensorParallelPtr tp)
    : eps(eps_), tp_(std::move(tp)) {
  weight = register_parameter("weight", Tensor::full({dim}, 1.0f));
  bias = register_parameter("bias", Tensor::zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return layer_norm(x, replicated_parameter(tp_.get(), weight),
                    replicated_parameter(tp_.get(), bias), eps);
}

}  // namespace braid::nn
