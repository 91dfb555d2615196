// CPU layer norm: per-row statistics forward; backward with per-thread weight-gradient sums.
#include <omp.h>

#include <cmath>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t rows = x.size(0), c = x.size(1);
  const float* px = x.data<float>();
  const float* w = weight.data<float>();
  const float* b = bias.data<float>();
  float* py = y.data<float>();
  float* pm = mean.data<float>();
  float* pr = rstd.data<float>();
#pragma omp parallel for if (rows * c > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = px + r * c;
    float s = 0;
    for (int64_t i = 0; i < c; ++i) s += in[i];
    const float m = s / static_cast<float>(c);
    float var = 0;
    for (int64_t i = 0; i < c; ++i) var += (in[i] - m) * (in[i] - m);
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);
    float* out = py + r * c;
    for (int64_t i = 0; i < c; ++i) out[i] = (in[i] - m) * rs * w[i] + b[i];
    pm[r] = m;
    pr[r] = rs;
  }
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
  const int threads = rows * c > (1 << 14) ? omp_get_max_threads() : 1;
  // Each thread sums its rows' weight/bias gradients privately; the sums are added in thread
  // order afterwards, so the result is the same on every run with the same thread count.
  std::vector<float> partial(static_cast<size_t>(threads) * 2 * c, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* dw_t = partial.data() + static_cast<size_t>(t) * 2 * c;
    float* db_t = dw_t + c;
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
      const float* in = px + r * c;
      const float* g = pdy + r * c;
      const float m = pm[r], rs = pr[r];
      float sum_g = 0, sum_g_xhat = 0;
      for (int64_t i = 0; i < c; ++i) {
        const float xhat = (in[i] - m) * rs;
        const float gw = g[i] * w[i];
        sum_g += gw;
        sum_g_xhat += gw * xhat;
        dw_t[i] += g[i] * xhat;
        db_t[i] += g[i];
      }
      const float inv_c = 1.0f / static_cast<float>(c);
      float* out = pdx + r * c;
      for (int64_t i = 0; i < c; ++i) {
        const float xhat = (in[i] - m) * rs;
        out[i] = rs * (g[i] * w[i] - inv_c * (sum_g + xhat * sum_g_xhat));
      }
    }
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
