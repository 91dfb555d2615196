// GPT-2 block modules: attention through the fused qkv op, MLP, and the residual block.
#include "braid/nn/transformer.h"

#include "braid/ops.h"

namespace braid::nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t heads) : n_head(heads) {
  BRAID_CHECK(heads > 0 && n_embd % heads == 0, "width {} is not divisible by {} heads", n_embd,
              heads);
  qkv = register_module("qkv", std::make_shared<Linear>(n_embd, 3 * n_embd));
  proj = register_module("proj", std::make_shared<Linear>(n_embd, n_embd));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  return proj->forward(causal_self_attention(qkv->forward(x), n_head));
}

Mlp::Mlp(int64_t n_embd) {
  fc = register_module("fc", std::make_shared<Linear>(n_embd, 4 * n_embd));
  proj = register_module("proj", std::make_shared<Linear>(4 * n_embd, n_embd));
}

Tensor Mlp::forward(const Tensor& x) const {
  return proj->forward(gelu(fc->forward(x)));
}

Block::Block(int64_t n_embd, int64_t n_head) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(n_embd));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(n_embd, n_head));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(n_embd));
  mlp = register_module("mlp", std::make_shared<Mlp>(n_embd));
}

Tensor Block::forward(const Tensor& x) const {
  Tensor h = add(x, attn->forward(ln1->forward(x)));
  return add(h, mlp->forward(ln2->forward(h)));
}

}  // namespace braid::nn
