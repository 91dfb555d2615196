// The pieces of a GPT-2 block: causal self-attention, the GELU MLP and the pre-LN block.
#pragma once

#include <memory>

#include "braid/nn/layers.h"

namespace braid::nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head);
  Tensor forward(const Tensor& x) const;  // [B, T, C] -> [B, T, C]
  std::shared_ptr<Linear> qkv, proj;      // qkv packs [q | k | v], each C wide
  int64_t n_head;
};

class Mlp : public Module {
 public:
  explicit Mlp(int64_t n_embd);
  Tensor forward(const Tensor& x) const;  // C -> 4C -> GELU -> C
  std::shared_ptr<Linear> fc, proj;
};

class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head);
  Tensor forward(const Tensor& x) const;  // x + attn(ln1(x)), then + mlp(ln2(.))
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;
};

}  // namespace braid::nn
