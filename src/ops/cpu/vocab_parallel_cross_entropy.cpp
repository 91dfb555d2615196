// CPU pieces of the vocabulary-parallel cross-entropy: per-row max, shifted exp-sum and target
// logit over one rank's columns, and the gradient from the global log-sum-exp.
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

}  // namespace braid::ops::cpu
