// The pieces of a GPT-2 block: causal self-attention, the GELU MLP and the pre-LN block.
//
// With a TensorParallel they are Megatron's tensor-parallel block: attention heads and MLP
// features split over the group (qkv and fc column-parallel, the projections row-parallel),
// two region exits per block; under sequence parallelism the LayerNorms and residuals hold a
// piece of the sequence. A null TensorParallel gives the single-process block.
#pragma once

#include <memory>

#include "braid/nn/layers.h"
#include "braid/nn/parallel_layers.h"

namespace braid::nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, TensorParallelPtr tp = nullptr);
  Tensor forward(const Tensor& x) const;  // [B, T, C] -> [B, T, C]
  // qkv packs [q | k | v], each C wide (each rank: its heads of each).
  std::shared_ptr<ColumnParallelLinear> qkv;
  std::shared_ptr<RowParallelLinear> proj;
  int64_t n_head;       // in the whole model
  int64_t local_heads;  // on this rank
};

class Mlp : public Module {
 public:
  explicit Mlp(int64_t n_embd, TensorParallelPtr tp = nullptr);
  Tensor forward(const Tensor& x) const;  // C -> 4C -> GELU -> C
  std::shared_ptr<ColumnParallelLinear> fc;
  std::shared_ptr<RowParallelLinear> proj;
};

class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head, TensorParallelPtr tp = nullptr);
  Tensor forward(const Tensor& x) const;  // x + attn(ln1(x)), then + mlp(ln2(.))
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;
};

}  // namespace braid::nn
