// CPU kernels for GELU (tanh approximation) and row softmax.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for simd if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float v = px[i];
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    py[i] = 0.5f * v * (1.0f + fast_tanh(inner));
  }
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
#pragma omp parallel for simd if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float v = px[i];
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    const float t = fast_tanh(inner);
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    pdx[i] = pdy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  }
}

void softmax_forward(const Tensor& x, Tensor& y) {
  const int64_t c = x.size(-1), rows = x.numel() / std::max<int64_t>(c, 1);
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for if (rows * c > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = px + r * c;
    float* out = py + r * c;
    float mx = -INFINITY;
    for (int64_t i = 0; i < c; ++i) mx = std::max(mx, in[i]);
    float total = 0;
#pragma omp simd reduction(+ : total)
    for (int64_t i = 0; i < c; ++i) {
      out[i] = fast_exp(in[i] - mx);
      total += out[i];
    }
    const float inv = 1.0f / total;
    for (int64_t i = 0; i < c; ++i) out[i] *= inv;
  }
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  const int64_t c = y.size(-1), rows = y.numel() / std::max<int64_t>(c, 1);
  const float* py = y.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
#pragma omp parallel for if (rows * c > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = py + r * c;
    const float* gr = pdy + r * c;
    float dot = 0;
    for (int64_t i = 0; i < c; ++i) dot += yr[i] * gr[i];
    for (int64_t i = 0; i < c; ++i) pdx[r * c + i] = yr[i] * (gr[i] - dot);
  }
}

}  // namespace braid::ops::cpu
