// CPU optimizer updates: AdamW (PyTorch's operation order) and SGD with momentum.
#include <omp.h>

#include <cmath>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {

namespace {

// Per-parameter constants of one AdamW update.
struct AdamWScalars {
  float beta1, beta2, one_minus_b1, one_minus_b2, eps, decay, step_size, bias2_sqrt, grad_scale;
};

AdamWScalars adamw_scalars(const AdamWHyper& hp, float grad_scale) {
  // Bias corrections in double, then rounded once (as PyTorch computes them in Python floats).
  const double bias1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
  return {hp.beta1,
          hp.beta2,
          1.0f - hp.beta1,
          1.0f - hp.beta2,
          hp.eps,
          1.0f - hp.lr * hp.weight_decay,
          static_cast<float>(hp.lr / bias1),
          static_cast<float>(std::sqrt(bias2)),
          grad_scale};
}

// Elements [begin, end) of one update. Both kernels run every element through this loop, so a
// parameter's result does not depend on which kernel or how many threads updated it.
inline void adamw_range(const AdamWScalars& s, float* p, const float* g, float* m, float* v,
                        int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] * s.grad_scale;
    const float mi = s.beta1 * m[i] + s.one_minus_b1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / s.bias2_sqrt + s.eps;
    p[i] = p[i] * s.decay - s.step_size * (mi / denom);
  }
}

constexpr int64_t kSplitMin = int64_t{1} << 15;  // smaller updates go whole to one thread

}  // namespace

void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
           const AdamWHyper& hp, float grad_scale) {
  const AdamWUpdate one{&param, &grad, &exp_avg, &exp_avg_sq, hp};
  adamw_group({&one, 1}, grad_scale);
}

// One parallel region for all updates. Each thread takes its share of every large update and
// moves on without waiting: a region per parameter, each ending in a barrier, cost ~2% of a
// GPT-2 124M step on two cores, the faster thread idling while the other finished its half.
// Small updates go whole to the threads in turn.
void adamw_group(std::span<const AdamWUpdate> updates, float grad_scale) {
  int64_t total = 0;
  for (const AdamWUpdate& u : updates) total += u.param->numel();
#pragma omp parallel if (total > kSplitMin)
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    int64_t next_small = 0;
    for (const AdamWUpdate& u : updates) {
      const int64_t n = u.param->numel();
      int64_t begin = 0, end = n;
      if (n > kSplitMin) {
        begin = n * me / threads;
        end = n * (me + 1) / threads;
      } else if (next_small++ % threads != me) {
        continue;
      }
      adamw_range(adamw_scalars(u.hyper, grad_scale), u.param->data<float>(), u.grad->data<float>(),
                  u.exp_avg->data<float>(), u.exp_avg_sq->data<float>(), begin, end);
    }
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
