// CPU pieces of the vocabulary-parallel cross-entropy and embedding: targets and ids mapped to
// one rank's piece, per-row max, shifted exp-sum and target logit over its columns, the losses
// and the gradient from the global log-sum-exp.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {

void vocab_shard_max(const Tensor& logits, int64_t valid, Tensor& maxima) {
  const int64_t rows = logits.size(0), vs = logits.size(1);
  const float* x = logits.data<float>();
  float* out = maxima.data<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) out[r] = row_max(x + r * vs, valid);
}

void vocab_shard_sum_exp(const Tensor& logits, const Tensor& targets, int64_t valid,
                         const Tensor& row_max, Tensor& sum_exp, Tensor& target_logit) {
  const int64_t rows = logits.size(0), vs = logits.size(1);
  const float* x = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  const float* mx = row_max.data<float>();
  float* se = sum_exp.data<float>();
  float* tl = target_logit.data<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * vs;
    se[r] = valid > 0 ? row_sum_exp(row, valid, mx[r]) : 0.0f;
    tl[r] = t[r] >= 0 ? row[t[r]] : 0.0f;
  }
}

void vocab_shard_backward(const Tensor& logits, const Tensor& targets, int64_t valid,
                          const Tensor& lse, float scale, Tensor& dlogits) {
  const int64_t rows = logits.size(0), vs = logits.size(1);
  const float* x = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  const float* l = lse.data<float>();
  float* dx = dlogits.data<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    float* drow = dx + r * vs;
    int64_t first_padding = valid;
    if (t[r] == kTargetIgnored) {
      first_padding = 0;
    } else {
      row_exp(x + r * vs, valid, l[r], scale, drow);
      if (t[r] >= 0) drow[t[r]] -= scale;
    }
    for (int64_t i = first_padding; i < vs; ++i) drow[i] = 0.0f;
  }
}

void vocab_shard_targets(const Tensor& targets, int64_t begin, int64_t valid, int64_t ignore_index,
                         Tensor& local) {
  const int32_t* t = targets.data<int32_t>();
  int32_t* out = local.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int64_t column = static_cast<int64_t>(t[i]) - begin;
    out[i] = t[i] == ignore_index            ? kTargetIgnored
             : column >= 0 && column < valid ? static_cast<int32_t>(column)
                                             : kTargetElsewhere;
  }
}

void vocab_shard_loss(const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                      const Tensor& local_targets, Tensor& lse, Tensor& losses) {
  const float *mx = row_max.data<float>(), *se = sum_exp.data<float>(),
              *tl = target_logit.data<float>();
  const int32_t* t = local_targets.data<int32_t>();
  float *l = lse.data<float>(), *loss = losses.data<float>();
  for (int64_t r = 0; r < row_max.numel(); ++r) {
    l[r] = mx[r] + std::log(se[r]);
    loss[r] = t[r] == kTargetIgnored ? 0.0f : l[r] - tl[r];
  }
}

void vocab_shard_ids(const Tensor& ids, int64_t begin, int64_t rows, Tensor& local, Tensor& mask) {
  const int32_t* id = ids.data<int32_t>();
  int32_t* out = local.data<int32_t>();
  float* m = mask.data<float>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t row = static_cast<int64_t>(id[i]) - begin;
    const bool mine = row >= 0 && row < rows;
    out[i] = mine ? static_cast<int32_t>(row) : 0;
    m[i] = mine ? 1.0f : 0.0f;
  }
}

}  // namespace braid::ops::cpu
