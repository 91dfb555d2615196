// CPU fused log-softmax + cross-entropy over the unpadded vocabulary columns.
//
// Both kernels are bound by the exp polynomial over ~50k columns a row, so on CPUs with
// AVX-512 the rows run 16 lanes at a time (chosen at run time; the library itself targets
// x86-64-v3), which halves the instructions per element.
#include <cmath>

#include "ops/cpu/avx512_dispatch.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {
namespace {

// The log-sum-exp of one row's first n columns.
template <class V>
[[gnu::always_inline]] inline float row_lse(const float* row, int64_t n) {
  const float mx = row_max<V>(row, n);
  return mx + std::log(row_sum_exp<V>(row, n, mx));
}

// The fused kernel's row: returns the log-sum-exp (the same value as row_lse) and leaves
// scale * softmax(row) in out, one exponential per element: out first holds e^(x - max),
// whose sum gives the log-sum-exp, then is scaled in place while the row is still in cache.
template <class V>
[[gnu::always_inline]] inline float row_lse_softmax(const float* row, int64_t n, float scale,
                                                    float* out) {
  const float mx = row_max<V>(row, n);
  const float sum = row_exp<V>(row, n, mx, 1.0f, out);
  const float factor = scale / sum;
  for (int64_t i = 0; i < n; ++i) out[i] *= factor;
  return mx + std::log(sum);
}

float row_lse_v8(const float* row, int64_t n) {
  return row_lse<Vec8>(row, n);
}
void row_softmax_v8(const float* row, int64_t n, float lse, float scale, float* out) {
  row_exp<Vec8>(row, n, lse, scale, out);
}
float row_lse_softmax_v8(const float* row, int64_t n, float scale, float* out) {
  return row_lse_softmax<Vec8>(row, n, scale, out);
}

#if BRAID_HAVE_AVX512_TARGET
BRAID_TARGET_AVX512 float row_lse_v16(const float* row, int64_t n) {
  return row_lse<Vec16>(row, n);
}
BRAID_TARGET_AVX512 void row_softmax_v16(const float* row, int64_t n, float lse, float scale,
                                         float* out) {
  row_exp<Vec16>(row, n, lse, scale, out);
}
BRAID_TARGET_AVX512 float row_lse_softmax_v16(const float* row, int64_t n, float scale,
                                              float* out) {
  return row_lse_softmax<Vec16>(row, n, scale, out);
}
#else
float row_lse_v16(const float* row, int64_t n) {
  return row_lse_v8(row, n);
}
void row_softmax_v16(const float* row, int64_t n, float lse, float scale, float* out) {
  row_softmax_v8(row, n, lse, scale, out);
}
float row_lse_softmax_v16(const float* row, int64_t n, float scale, float* out) {
  return row_lse_softmax_v8(row, n, scale, out);
}
#endif

// The rest of a gradient row once its first num_classes entries hold scale * softmax: the
// padding columns get no gradient and the target's entry loses scale. An ignored row is all 0.
void finish_grad_row(float* drow, int64_t vp, int64_t num_classes, int32_t target, bool ignored,
                     float scale) {
  for (int64_t i = ignored ? 0 : num_classes; i < vp; ++i) drow[i] = 0.0f;
  if (!ignored) drow[target] -= scale;
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                           int64_t ignore_index, Tensor& losses, Tensor& lse) {
  const int64_t rows = logits.size(0), vp = logits.size(1);
  const float* x = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  float* loss = losses.data<float>();
  float* out_lse = lse.data<float>();
  const auto lse_of = use_avx512() ? row_lse_v16 : row_lse_v8;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * vp;
    const float row_lse = lse_of(row, num_classes);
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
  const auto softmax_of = use_avx512() ? row_softmax_v16 : row_softmax_v8;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    float* drow = dx + r * vp;
    const bool ignored = t[r] == ignore_index;
    if (!ignored) softmax_of(x + r * vp, num_classes, l[r], scale, drow);
    finish_grad_row(drow, vp, num_classes, t[r], ignored, scale);
  }
}

void cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                         int64_t ignore_index, float scale, Tensor& losses, Tensor& dlogits) {
  const int64_t rows = logits.size(0), vp = logits.size(1);
  const float* x = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  float* loss = losses.data<float>();
  float* dx = dlogits.data<float>();
  const auto lse_softmax_of = use_avx512() ? row_lse_softmax_v16 : row_lse_softmax_v8;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    float* drow = dx + r * vp;
    const float* row = x + r * vp;
    const bool ignored = t[r] == ignore_index;
    // Read before the row's gradient is written: dlogits may be the logits themselves.
    const float target_logit = ignored ? 0.0f : row[t[r]];
    loss[r] = ignored ? 0.0f : lse_softmax_of(row, num_classes, scale, drow) - target_logit;
    finish_grad_row(drow, vp, num_classes, t[r], ignored, scale);
  }
}

}  // namespace braid::ops::cpu
