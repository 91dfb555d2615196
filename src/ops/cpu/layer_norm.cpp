// CPU layer norm: per-row statistics forward; backward with per-thread weight-gradient sums.
//
// A row's sums (mean, variance, and the backward's two dot products) run in vector lanes:
// summed one element after another they form a dependency chain of c additions, which made
// these kernels latency-bound rather than bandwidth-bound. Rows run 16 lanes at a time
// on AVX-512 and 8 otherwise.
#include <omp.h>

#include <cmath>
#include <vector>

#include "ops/cpu/avx512_dispatch.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {
namespace {

// Normalises one row of c values into out; returns its mean and 1/std.
template <class V>
[[gnu::always_inline]] inline void normalize_row(const float* in, const float* w, const float* b,
                                                 int64_t c, float eps, float* out, float* mean,
                                                 float* rstd) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const int64_t body = c / L * L;
  V acc{};
  for (int64_t i = 0; i < body; i += L) acc += load_lanes<V>(in + i);
  float s = lane_sum(acc);
  for (int64_t i = body; i < c; ++i) s += in[i];
  const float m = s / static_cast<float>(c);
  V sq{};
  for (int64_t i = 0; i < body; i += L) {
    const V d = load_lanes<V>(in + i) - m;
    sq += d * d;
  }
  float var = lane_sum(sq);
  for (int64_t i = body; i < c; ++i) var += (in[i] - m) * (in[i] - m);
  const float rs = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);
  for (int64_t i = 0; i < body; i += L)
    store_lanes(out + i,
                (load_lanes<V>(in + i) - m) * rs * load_lanes<V>(w + i) + load_lanes<V>(b + i));
  for (int64_t i = body; i < c; ++i) out[i] = (in[i] - m) * rs * w[i] + b[i];
  *mean = m;
  *rstd = rs;
}

// One row's input gradient into dx, its weight and bias gradients added to dw and db.
template <class V>
[[gnu::always_inline]] inline void normalize_row_grad(const float* in, const float* g,
                                                      const float* w, float m, float rs, int64_t c,
                                                      float* dx, float* dw, float* db) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const int64_t body = c / L * L;
  V acc_g{}, acc_g_xhat{};
  for (int64_t i = 0; i < body; i += L) {
    const V xhat = (load_lanes<V>(in + i) - m) * rs;
    const V gi = load_lanes<V>(g + i);
    const V gw = gi * load_lanes<V>(w + i);
    acc_g += gw;
    acc_g_xhat += gw * xhat;
    store_lanes(dw + i, load_lanes<V>(dw + i) + gi * xhat);
    store_lanes(db + i, load_lanes<V>(db + i) + gi);
  }
  float sum_g = lane_sum(acc_g), sum_g_xhat = lane_sum(acc_g_xhat);
  for (int64_t i = body; i < c; ++i) {
    const float xhat = (in[i] - m) * rs;
    const float gw = g[i] * w[i];
    sum_g += gw;
    sum_g_xhat += gw * xhat;
    dw[i] += g[i] * xhat;
    db[i] += g[i];
  }
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t i = 0; i < body; i += L) {
    const V xhat = (load_lanes<V>(in + i) - m) * rs;
    store_lanes(dx + i, rs * (load_lanes<V>(g + i) * load_lanes<V>(w + i) -
                              inv_c * (sum_g + xhat * sum_g_xhat)));
  }
  for (int64_t i = body; i < c; ++i) {
    const float xhat = (in[i] - m) * rs;
    dx[i] = rs * (g[i] * w[i] - inv_c * (sum_g + xhat * sum_g_xhat));
  }
}

void normalize_row_v8(const float* in, const float* w, const float* b, int64_t c, float eps,
                      float* out, float* mean, float* rstd) {
  normalize_row<Vec8>(in, w, b, c, eps, out, mean, rstd);
}
void normalize_row_grad_v8(const float* in, const float* g, const float* w, float m, float rs,
                           int64_t c, float* dx, float* dw, float* db) {
  normalize_row_grad<Vec8>(in, g, w, m, rs, c, dx, dw, db);
}
#if BRAID_HAVE_AVX512_TARGET
BRAID_TARGET_AVX512 void normalize_row_v16(const float* in, const float* w, const float* b,
                                           int64_t c, float eps, float* out, float* mean,
                                           float* rstd) {
  normalize_row<Vec16>(in, w, b, c, eps, out, mean, rstd);
}
BRAID_TARGET_AVX512 void normalize_row_grad_v16(const float* in, const float* g, const float* w,
                                                float m, float rs, int64_t c, float* dx, float* dw,
                                                float* db) {
  normalize_row_grad<Vec16>(in, g, w, m, rs, c, dx, dw, db);
}
#else
constexpr auto normalize_row_v16 = normalize_row_v8;
constexpr auto normalize_row_grad_v16 = normalize_row_grad_v8;
#endif

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t rows = x.size(0), c = x.size(1);
  const float* px = x.data<float>();
  const float* w = weight.data<float>();
  const float* b = bias.data<float>();
  float* py = y.data<float>();
  float* pm = mean.data<float>();
  float* pr = rstd.data<float>();
  const auto row_of = use_avx512() ? normalize_row_v16 : normalize_row_v8;
#pragma omp parallel for if (rows * c > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) row_of(px + r * c, w, b, c, eps, py + r * c, pm + r, pr + r);
}

void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dweight,
                         Tensor& dbias) {
  const int64_t rows = x.size(0), c = x.size(1);
  const float* px = x.data<float>();
  const float* w = weight.data<float>();
  const float* pm = mean.data<float>();
  const float* pr = rstd.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
  const auto row_grad_of = use_avx512() ? normalize_row_grad_v16 : normalize_row_grad_v8;
  const int threads = rows * c > (1 << 14) ? omp_get_max_threads() : 1;
  // Each thread sums its rows' weight/bias gradients privately; the sums are added in thread
  // order afterwards, so the result is the same on every run with the same thread count.
  std::vector<float> partial(static_cast<size_t>(threads) * 2 * c, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* dw_t = partial.data() + static_cast<size_t>(t) * 2 * c;
    float* db_t = dw_t + c;
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r)
      row_grad_of(px + r * c, pdy + r * c, w, pm[r], pr[r], c, pdx + r * c, dw_t, db_t);
  }
  float* dw = dweight.data<float>();
  float* db = dbias.data<float>();
  for (int64_t i = 0; i < c; ++i) dw[i] = db[i] = 0;
  for (int t = 0; t < threads; ++t) {
    const float* dw_t = partial.data() + static_cast<size_t>(t) * 2 * c;
    for (int64_t i = 0; i < c; ++i) {
      dw[i] += dw_t[i];
      db[i] += dw_t[c + i];
    }
  }
}

}  // namespace braid::ops::cpu
