// GPT-2 block modules: attention through the fused qkv op, MLP, and the residual block.
#include "braid/nn/transformer.h"

#include "braid/ops.h"

namespace braid::nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t heads, TensorParallelPtr tp)
    : n_head(heads), local_heads(heads / (tp ? tp->size() : 1)) {
  BRAID_CHECK(heads > 0 && n_embd % heads == 0, "width {} is not divisible by {} heads", n_embd,
              heads);
  BRAID_CHECK(!tp || heads % tp->size() == 0,
              "{} attention heads do not split over tp={} (each rank owns whole heads)", heads,
              tp->size());
  qkv = register_module(
      "qkv", std::make_shared<ColumnParallelLinear>(n_embd, 3 * n_embd, tp, true, /*groups=*/3));
  proj = register_module("proj", std::make_shared<RowParallelLinear>(n_embd, n_embd, tp));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  // This rank's [q | k | v] columns hold whole heads, so attention runs locally.
  return proj->forward(causal_self_attention(qkv->forward(x), local_heads));
}

Mlp::Mlp(int64_t n_embd, TensorParallelPtr tp) {
  fc = register_module("fc", std::make_shared<ColumnParallelLinear>(n_embd, 4 * n_embd, tp));
  proj = register_module("proj", std::make_shared<RowParallelLinear>(4 * n_embd, n_embd, tp));
}

Tensor Mlp::forward(const Tensor& x) const {
  return proj->forward(gelu(fc->forward(x)));
}

Block::Block(int64_t n_embd, int64_t n_head, TensorParallelPtr tp) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(n_embd, 1e-5f, tp));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(n_embd, n_head, tp));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(n_embd, 1e-5f, tp));
  mlp = register_module("mlp", std::make_shared<Mlp>(n_embd, tp));
}

Tensor Block::forward(const Tensor& x) const {
  Tensor h = add(x, attn->forward(ln1->forward(x)));
  return add(h, mlp->forward(ln2->forward(h)));
}

}  // namespace braid::nn
