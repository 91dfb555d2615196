// CPU optimizer updates: AdamW (PyTorch's operation order) and SGD with momentum.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {

void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
           const AdamWHyper& hp, float grad_scale) {
  const int64_t n = param.numel();
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  const float decay = 1.0f - hp.lr * hp.weight_decay;
  // Bias corrections in double, then rounded once (as PyTorch computes them in Python floats).
  const double bias1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float step_size = static_cast<float>(hp.lr / bias1);
  const float one_minus_b1 = 1.0f - hp.beta1, one_minus_b2 = 1.0f - hp.beta2;
#pragma omp parallel for simd if (parallel : n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;
    const float mi = hp.beta1 * m[i] + one_minus_b1 * gi;
    const float vi = hp.beta2 * v[i] + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bias2_sqrt + hp.eps;
    p[i] = p[i] * decay - step_size * (mi / denom);
  }
}

void sgd(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
         float weight_decay, float grad_scale, bool first_step) {
  const int64_t n = param.numel();
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* buf = momentum != 0.0f ? momentum_buf.data<float>() : nullptr;
#pragma omp parallel for simd if (parallel : n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] * grad_scale + weight_decay * p[i];
    if (buf) {
      buf[i] = first_step ? d : momentum * buf[i] + d;
      d = buf[i];
    }
    p[i] -= lr * d;
  }
}

}  // namespace braid::ops::cpu
