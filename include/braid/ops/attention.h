// Differentiable scaled dot-product attention: tiled online-softmax forward, recomputing backward.
//
// The same algorithm as the fused CUDA kernel: the forward never materialises the T x T
// score matrix, it keeps each query row's log-sum-exp, and the backward recomputes the
// probabilities from it.
#pragma once

#include "braid/core/tensor.h"

namespace braid {

// q, k, v: [B, H, T, D] (any strides with unit stride in D). Returns [B, H, T, D]; the
// result is a view of a [B, T, H, D] buffer, so transpose(1, 2) + reshape is free.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = true);

// GPT's fused form: qkv [B, T, 3C] laid out [q | k | v], n_head heads of C / n_head.
// Returns [B, T, C]; the backward writes the qkv gradient in one buffer.
Tensor causal_self_attention(const Tensor& qkv, int64_t n_head);

}  // namespace braid
