// CPU fused log-softmax + cross-entropy over the unpadded vocabulary columns.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                           int64_t ignore_index, Tensor& losses, Tensor& lse) {
  const int64_t rows = logits.size(0), vp = logits.size(1);
  const float* x = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  float* loss = losses.data<float>();
  float* out_lse = lse.data<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * vp;
    const float mx = row_max(row, num_classes);
    const float row_lse = mx + std::log(row_sum_exp(row, num_classes, mx));
    out_lse[r] = row_lse;
    loss[r] = t[r] == ignore_index ? 0.0f : row_lse - row[t[r]];
  }
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            int64_t num_classes, int64_t ignore_index, float scale,
                            Tensor& dlogits) {
  const int64_t rows = logits.size(0), vp = logits.size(1);
  const float* x = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  const float* l = lse.data<float>();
  float* dx = dlogits.data<float>();
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    float* drow = dx + r * vp;
    const float* row = x + r * vp;
    if (t[r] == ignore_index) {
      for (int64_t i = 0; i < vp; ++i) drow[i] = 0.0f;
      continue;
    }
    row_exp(row, num_classes, l[r], scale, drow);
    for (int64_t i = num_classes; i < vp; ++i) drow[i] = 0.0f;
    drow[t[r]] -= scale;
  }
}

}  // namespace braid::ops::cpu
