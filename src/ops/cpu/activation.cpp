// CPU kernels for GELU (tanh approximation) and row softmax.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr int64_t kChunk = 4096;  // elements per parallel work item

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
  auto gelu = [](auto v) {
    return 0.5f * v * (1.0f + fast_tanh(kSqrt2OverPi * (v + kGeluCoeff * v * v * v)));
  };
#pragma omp parallel for if (n > (1 << 14))
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t e = std::min(n, b + kChunk);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) store8(py + i, gelu(load8(px + i)));
    for (; i < e; ++i) py[i] = gelu(px[i]);
  }
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
  auto grad = [](auto v, auto g) {
    const auto t = fast_tanh(kSqrt2OverPi * (v + kGeluCoeff * v * v * v));
    const auto dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    return g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  };
#pragma omp parallel for if (n > (1 << 14))
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t e = std::min(n, b + kChunk);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) store8(pdx + i, grad(load8(px + i), load8(pdy + i)));
    for (; i < e; ++i) pdx[i] = grad(px[i], pdy[i]);
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
    const float mx = row_max(in, c);
    const float inv = 1.0f / row_exp(in, c, mx, 1.0f, out);
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
