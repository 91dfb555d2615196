// CPU kernels for GELU (tanh approximation; 16 lanes at a time on AVX-512) and row softmax.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cpu/avx512_dispatch.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr int64_t kChunk = 4096;  // elements per parallel work item

// GELU and its derivative for a float or a vector of lanes (V is float, Vec8 or Vec16).
template <class V>
[[gnu::always_inline]] inline V tanh_of(V x) {
  if constexpr (std::is_same_v<V, float>)
    return fast_tanh(x);
  else
    return tanh_lanes(x);
}
template <class V>
[[gnu::always_inline]] inline V gelu(V v) {
  return 0.5f * v * (1.0f + tanh_of(kSqrt2OverPi * (v + kGeluCoeff * v * v * v)));
}
template <class V>
[[gnu::always_inline]] inline V gelu_grad(V v, V g) {
  const V t = tanh_of(kSqrt2OverPi * (v + kGeluCoeff * v * v * v));
  const V dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
  return g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
}

// One chunk, V's lanes at a time, then the tail one element at a time.
template <class V>
[[gnu::always_inline]] inline void gelu_chunk(const float* x, float* y, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store_lanes(y + i, gelu(load_lanes<V>(x + i)));
  for (; i < n; ++i) y[i] = gelu(x[i]);
}
template <class V>
[[gnu::always_inline]] inline void gelu_grad_chunk(const float* x, const float* dy, float* dx,
                                                   int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    store_lanes(dx + i, gelu_grad(load_lanes<V>(x + i), load_lanes<V>(dy + i)));
  for (; i < n; ++i) dx[i] = gelu_grad(x[i], dy[i]);
}

void gelu_chunk_v8(const float* x, float* y, int64_t n) {
  gelu_chunk<Vec8>(x, y, n);
}
void gelu_grad_chunk_v8(const float* x, const float* dy, float* dx, int64_t n) {
  gelu_grad_chunk<Vec8>(x, dy, dx, n);
}
#if BRAID_HAVE_AVX512_TARGET
BRAID_TARGET_AVX512 void gelu_chunk_v16(const float* x, float* y, int64_t n) {
  gelu_chunk<Vec16>(x, y, n);
}
BRAID_TARGET_AVX512 void gelu_grad_chunk_v16(const float* x, const float* dy, float* dx,
                                             int64_t n) {
  gelu_grad_chunk<Vec16>(x, dy, dx, n);
}
#else
constexpr auto gelu_chunk_v16 = gelu_chunk_v8;
constexpr auto gelu_grad_chunk_v16 = gelu_grad_chunk_v8;
#endif

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const auto chunk = use_avx512() ? gelu_chunk_v16 : gelu_chunk_v8;
#pragma omp parallel for if (n > (1 << 14))
  for (int64_t b = 0; b < n; b += kChunk) chunk(px + b, py + b, std::min(kChunk, n - b));
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
  const auto chunk = use_avx512() ? gelu_grad_chunk_v16 : gelu_grad_chunk_v8;
#pragma omp parallel for if (n > (1 << 14))
  for (int64_t b = 0; b < n; b += kChunk) chunk(px + b, pdy + b, pdx + b, std::min(kChunk, n - b));
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
