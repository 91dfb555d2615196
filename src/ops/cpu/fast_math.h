// exp and tanh for the CPU kernels: a branch-free polynomial evaluated 8 lanes at a time with
// GCC vector extensions (GCC does not vectorise libm's expf, nor this polynomial on its own).
// The lane-generic templates also give 16-lane versions for kernels that dispatch to AVX-512
// at run time (inlined there, so they compile for that target).
//
// exp: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then Cephes' degree-6
// polynomial for e^r and 2^n built in the exponent bits; relative error ~8e-8 (checked in
// tests/unit/ops against double exp). tanh(x) = 1 - 2 / (1 + e^{2x}) is accurate to ~2e-7
// absolute, which is what GELU needs (it uses 1 + tanh).
#pragma once

#include <bit>
#include <cstdint>

namespace braid::ops::cpu {

using Vec8 = float __attribute__((vector_size(32)));
using Vec8i = int32_t __attribute__((vector_size(32)));
using Vec16 = float __attribute__((vector_size(64)));
using Vec16i = int32_t __attribute__((vector_size(64)));

// The int vector of a float vector's width.
template <class V>
using IntLanes = decltype(V{} < V{});

template <class F>
[[gnu::always_inline]] inline F exp_poly(F x, F n) {
  F r = x - n * 0.693359375f;  // ln2 split in two so n * ln2 stays exact
  r = r - n * -2.12194440e-4f;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

inline float fast_exp(float x) {
  // Beyond these, expf over/underflows; clamping keeps the exponent bit trick valid.
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  return exp_poly(x, n) * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

template <class V>
[[gnu::always_inline]] inline V exp_lanes(V x) {
  using VI = IntLanes<V>;
  x = x < -87.0f ? V{} - 87.0f : x;
  x = x > 88.0f ? V{} + 88.0f : x;
  const V shifted = x * 1.44269504088896341f + 0.5f;
  VI ni = __builtin_convertvector(shifted, VI);    // truncates toward zero
  ni += __builtin_convertvector(ni, V) > shifted;  // true is -1: floor for negatives
  const V n = __builtin_convertvector(ni, V);
  return exp_poly(x, n) * reinterpret_cast<V>((ni + 127) << 23);
}

inline Vec8 fast_exp(Vec8 x) {
  return exp_lanes(x);
}

inline float fast_tanh(float x) {
  return 1.0f - 2.0f / (1.0f + fast_exp(2.0f * x));
}
template <class V>
[[gnu::always_inline]] inline V tanh_lanes(V x) {
  return 1.0f - 2.0f / (1.0f + exp_lanes(2.0f * x));
}
inline Vec8 fast_tanh(Vec8 x) {
  return tanh_lanes(x);
}

template <class V>
[[gnu::always_inline]] inline V load_lanes(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
[[gnu::always_inline]] inline void store_lanes(float* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}
inline Vec8 load8(const float* p) {
  return load_lanes<Vec8>(p);
}
inline void store8(float* p, Vec8 v) {
  store_lanes(p, v);
}

// The sum of a vector's lanes, in lane order.
template <class V>
[[gnu::always_inline]] inline float lane_sum(V v) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// Row helpers shared by softmax, cross-entropy and attention; V sets the lanes per step.
template <class V = Vec8>
[[gnu::always_inline]] inline float row_max(const float* x, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  float mx = -__builtin_inff();
  int64_t i = 0;
  if (n >= kLanes) {
    V m = load_lanes<V>(x);
    for (i = kLanes; i + kLanes <= n; i += kLanes) {
      const V v = load_lanes<V>(x + i);
      m = v > m ? v : m;
    }
    for (int l = 0; l < kLanes; ++l) mx = m[l] > mx ? m[l] : mx;
  }
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  return mx;
}

// out[i] = exp(x[i] - shift) * scale (skipped when out is null); returns sum_i exp(x[i] - shift).
// out may alias x.
template <class V = Vec8>
[[gnu::always_inline]] inline float row_exp(const float* x, int64_t n, float shift, float scale,
                                            float* out) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V acc{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V e = exp_lanes(load_lanes<V>(x + i) - shift);
    acc += e;
    if (out) store_lanes(out + i, e * scale);
  }
  float total = lane_sum(acc);
  for (; i < n; ++i) {
    const float e = fast_exp(x[i] - shift);
    total += e;
    if (out) out[i] = e * scale;
  }
  return total;
}

template <class V = Vec8>
[[gnu::always_inline]] inline float row_sum_exp(const float* x, int64_t n, float shift) {
  return row_exp<V>(x, n, shift, 1.0f, nullptr);
}

}  // namespace braid::ops::cpu
