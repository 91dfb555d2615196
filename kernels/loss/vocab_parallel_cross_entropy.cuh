// CUDA pieces of the vocabulary-parallel cross-entropy and embedding over one rank's piece.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// logits [N, Vs] is this rank's piece of the vocabulary; its first `valid` columns (0 <= valid
// <= Vs) are real classes and the rest is padding. targets (i32 [N]) are local columns in
// [0, valid), ops::kTargetElsewhere or ops::kTargetIgnored. The op layer builds the targets on
// the host; any other value that reaches a kernel anyway gives a NaN target logit and a zero
// gradient row (never an out-of-bounds read). One block per row for the two reductions.

// row_max[n] = max of logits[n, :valid]; -inf when valid == 0.
void vocab_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max);
// sum_exp[n] = sum of exp(logits[n, j] - row_max[n]) over j < valid (0 when valid == 0), with
// the all-reduced row_max; target_logit[n] = logits[n, targets[n]] for a local target, else 0.
void vocab_shard_sum_exp(const Tensor& logits, const Tensor& targets, int64_t valid,
                         const Tensor& row_max, Tensor& sum_exp, Tensor& target_logit);
// dlogits[n, j] = scale * (exp(logits[n, j] - lse[n]) - [j == targets[n]]) for j < valid, from
// the global lse; zero on padding columns and on ignored rows.
void vocab_shard_backward(const Tensor& logits, const Tensor& targets, int64_t valid,
                          const Tensor& lse, float scale, Tensor& dlogits);

// local[n] = targets[n] - begin where in [0, valid), ops::kTargetIgnored where targets[n] ==
// ignore_index, else ops::kTargetElsewhere (all i32 [N]).
void vocab_shard_targets(const Tensor& targets, int64_t begin, int64_t valid, int64_t ignore_index,
                         Tensor& local);
// lse[n] = row_max[n] + log(sum_exp[n]); losses[n] = lse[n] - target_logit[n], 0 where
// local_targets[n] is ops::kTargetIgnored.
void vocab_shard_loss(const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                      const Tensor& local_targets, Tensor& lse, Tensor& losses);
// local[n] = ids[n] - begin and mask[n] = 1 where in [0, rows), else 0 and 0 (mask f32).
void vocab_shard_ids(const Tensor& ids, int64_t begin, int64_t rows, Tensor& local, Tensor& mask);

}  // namespace braid::cuda
