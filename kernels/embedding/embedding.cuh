// CUDA embedding lookup (row gather) and its deterministic scatter-add gradient.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// out[n, :] = weight[ids[n], :]; weight [V, C] and out [N, C] dense f32, ids dense i32 [N].
// The op layer checks ids on the host; an id outside [0, V) that reaches the kernel anyway
// gives a NaN row (never an out-of-bounds read).
void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out);

// dweight[ids[n], :] += dout[n, :] (dweight zeroed by the caller). No atomics: a block owns a
// tile of columns and a residue class of vocabulary rows (id % partitions) and walks all tokens
// in order, so each element's sum runs in token order — reproducible, and bitwise equal to
// the CPU kernel, which adds in the same order. Out-of-range ids are skipped.
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight);

// How embedding_backward splits the work (host math, exposed for tests): blocks of
// kEmbeddingColumnsPerBlock columns times `partitions` vocabulary residue classes.
inline constexpr int kEmbeddingColumnsPerBlock = 128;
struct EmbeddingBackwardGrid {
  int64_t column_blocks = 1;
  int64_t partitions = 1;
};
EmbeddingBackwardGrid plan_embedding_backward(int64_t vocab, int64_t cols);

}  // namespace braid::cuda
