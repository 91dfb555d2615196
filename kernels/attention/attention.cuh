// CUDA scaled dot-product attention (optionally causal): tiled online-softmax forward and a
// backward that recomputes the probabilities from the saved log-sum-exp.
//
// Written for correctness and readability, not speed: fp32 CUDA cores (no tensor cores), one
// key per lane, head dim D <= kAttentionMaxHeadDim. Same algorithm as the CPU kernel
// (FlashAttention-2 without the tensor-core tiling), so out and lse agree to fp32 rounding.
#pragma once

#include <cstddef>

#include "braid/core/tensor.h"

namespace braid::cuda {

// q, k, v, out: [B, H, T, D] with unit stride in D and any other strides (views into a fused
// qkv buffer work as they are); lse: dense [B, H, T]. Grid: one block per (batch * head, tile
// of kAttentionQueryTile queries); keys stream through shared memory kAttentionKeyTile at a time.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale,
                       Tensor& out, Tensor& lse);

// dq, dk, dv are overwritten ([B, H, T, D], unit stride in D). No atomics: one pass owns a tile
// of keys and walks every query (dk, dv); another owns a tile of queries and walks every key
// (dq). Both recompute P and dS, so every sum runs in a fixed order: reproducible.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv);

inline constexpr int kAttentionMaxHeadDim = 128;
inline constexpr int kAttentionQueryTile = 16;  // 4 warps x 4 query rows
inline constexpr int kAttentionKeyTile = 32;    // one key per lane
inline constexpr int kAttentionThreads = 128;

// Grid and shared-memory sizes of the three kernels (host math, exposed for tests). Throws for
// D outside [1, kAttentionMaxHeadDim] or a problem too large for the grid.
struct AttentionLaunch {
  int64_t heads = 0;        // grid.x of every kernel: B * H
  int64_t query_tiles = 0;  // grid.y of forward and dq
  int64_t key_tiles = 0;    // grid.y of dk/dv
  size_t forward_smem_bytes = 0;
  size_t backward_smem_bytes = 0;  // > 48 KiB for large D: needs the opt-in attribute
};
AttentionLaunch plan_attention(int64_t batch, int64_t heads, int64_t tokens, int64_t head_dim);

}  // namespace braid::cuda
