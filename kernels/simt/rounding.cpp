// The explicitly rounded intrinsics (builtins_math.h), exactly as IEEE 754 defines them in each
// mode: the host's own hardware rounds, in the mode set here. Compiled with -frounding-math, and
// every operand and result passes through a volatile, so no operation moves across a mode switch.
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "builtins_math.h"

namespace {

// Runs f() with the rounding mode `mode`, restoring the caller's afterwards.
template <class R, class F>
R in_mode(int mode, F f) {
  const int old = std::fegetround();
  if (old != mode) std::fesetround(mode);
  const R r = f();
  if (old != mode) std::fesetround(old);
  return r;
}

template <class T>
T add(T a, T b, int mode) {
  volatile T x = a, y = b;
  return in_mode<T>(mode, [&] {
    volatile T r = x + y;
    return r;
  });
}
template <class T>
T sub(T a, T b, int mode) {
  volatile T x = a, y = b;
  return in_mode<T>(mode, [&] {
    volatile T r = x - y;
    return r;
  });
}
template <class T>
T mul(T a, T b, int mode) {
  volatile T x = a, y = b;
  return in_mode<T>(mode, [&] {
    volatile T r = x * y;
    return r;
  });
}
template <class T>
T div(T a, T b, int mode) {
  volatile T x = a, y = b;
  return in_mode<T>(mode, [&] {
    volatile T r = x / y;
    return r;
  });
}
// libm's fma is correctly rounded in the current mode (hardware FMA, or glibc's exact emulation).
template <class T>
T fused(T a, T b, T c, int mode) {
  volatile T x = a, y = b, z = c;
  return in_mode<T>(mode, [&] {
    volatile T r = std::fma(static_cast<T>(x), static_cast<T>(y), static_cast<T>(z));
    return r;
  });
}
template <class T>
T root(T a, int mode) {
  volatile T x = a;
  return in_mode<T>(mode, [&] {
    volatile T r = std::sqrt(static_cast<T>(x));
    return r;
  });
}
// Any value converted to R (float from double or an integer) in `mode`: the conversion
// instructions round in the current mode.
template <class R, class T>
R convert(T a, int mode) {
  volatile T x = a;
  return in_mode<R>(mode, [&] {
    volatile R r = static_cast<R>(x);
    return r;
  });
}

// Float to integer: round to an integral value in `mode` (exact), then saturate; NaN gives 0.
template <class I, class F>
I to_integer(F x, int mode) {
  if (std::isnan(x)) return 0;
  F r;
  switch (mode) {
    case FE_TOWARDZERO:
      r = std::trunc(x);
      break;
    case FE_UPWARD:
      r = std::ceil(x);
      break;
    case FE_DOWNWARD:
      r = std::floor(x);
      break;
    default:
      r = in_mode<F>(FE_TONEAREST, [&] { return std::nearbyint(x); });
      break;
  }
  // The limits as F are exact powers of two (or 0), so these comparisons are exact.
  if (r <= static_cast<F>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

constexpr int kRn = FE_TONEAREST;
constexpr int kRz = FE_TOWARDZERO;
constexpr int kRu = FE_UPWARD;
constexpr int kRd = FE_DOWNWARD;

}  // namespace

#define BRAID_SIMT_DEFINE(mode, MODE)                 \
  float __fadd_##mode(float x, float y) {             \
    return add(x, y, MODE);                           \
  }                                                   \
  float __fsub_##mode(float x, float y) {             \
    return sub(x, y, MODE);                           \
  }                                                   \
  float __fmul_##mode(float x, float y) {             \
    return mul(x, y, MODE);                           \
  }                                                   \
  float __fdiv_##mode(float x, float y) {             \
    return div(x, y, MODE);                           \
  }                                                   \
  float __fmaf_##mode(float x, float y, float z) {    \
    return fused(x, y, z, MODE);                      \
  }                                                   \
  float __frcp_##mode(float x) {                      \
    return div(1.0f, x, MODE);                        \
  }                                                   \
  float __fsqrt_##mode(float x) {                     \
    return root(x, MODE);                             \
  }                                                   \
  double __dadd_##mode(double x, double y) {          \
    return add(x, y, MODE);                           \
  }                                                   \
  double __dsub_##mode(double x, double y) {          \
    return sub(x, y, MODE);                           \
  }                                                   \
  double __dmul_##mode(double x, double y) {          \
    return mul(x, y, MODE);                           \
  }                                                   \
  double __ddiv_##mode(double x, double y) {          \
    return div(x, y, MODE);                           \
  }                                                   \
  double __fma_##mode(double x, double y, double z) { \
    return fused(x, y, z, MODE);                      \
  }                                                   \
  double __drcp_##mode(double x) {                    \
    return div(1.0, x, MODE);                         \
  }                                                   \
  double __dsqrt_##mode(double x) {                   \
    return root(x, MODE);                             \
  }                                                   \
  int __float2int_##mode(float x) {                   \
    return to_integer<int>(x, MODE);                  \
  }                                                   \
  unsigned __float2uint_##mode(float x) {             \
    return to_integer<unsigned>(x, MODE);             \
  }                                                   \
  long long __float2ll_##mode(float x) {              \
    return to_integer<long long>(x, MODE);            \
  }                                                   \
  unsigned long long __float2ull_##mode(float x) {    \
    return to_integer<unsigned long long>(x, MODE);   \
  }                                                   \
  int __double2int_##mode(double x) {                 \
    return to_integer<int>(x, MODE);                  \
  }                                                   \
  unsigned __double2uint_##mode(double x) {           \
    return to_integer<unsigned>(x, MODE);             \
  }                                                   \
  long long __double2ll_##mode(double x) {            \
    return to_integer<long long>(x, MODE);            \
  }                                                   \
  unsigned long long __double2ull_##mode(double x) {  \
    return to_integer<unsigned long long>(x, MODE);   \
  }                                                   \
  float __double2float_##mode(double x) {             \
    return convert<float>(x, MODE);                   \
  }                                                   \
  float __int2float_##mode(int x) {                   \
    return convert<float>(x, MODE);                   \
  }                                                   \
  float __uint2float_##mode(unsigned x) {             \
    return convert<float>(x, MODE);                   \
  }                                                   \
  float __ll2float_##mode(long long x) {              \
    return convert<float>(x, MODE);                   \
  }                                                   \
  float __ull2float_##mode(unsigned long long x) {    \
    return convert<float>(x, MODE);                   \
  }                                                   \
  double __ll2double_##mode(long long x) {            \
    return convert<double>(x, MODE);                  \
  }                                                   \
  double __ull2double_##mode(unsigned long long x) {  \
    return convert<double>(x, MODE);                  \
  }

BRAID_SIMT_DEFINE(rn, kRn)
BRAID_SIMT_DEFINE(rz, kRz)
BRAID_SIMT_DEFINE(ru, kRu)
BRAID_SIMT_DEFINE(rd, kRd)
#undef BRAID_SIMT_DEFINE

float __frsqrt_rn(float x) {
  if (std::isnan(x) || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (std::isinf(x)) return 0.0f;
  // A candidate within one ulp, then the exact decision: the true value y = 1/sqrt(x) lies above
  // a midpoint m exactly when m * m * x < 1. m has 25 significant bits, so m * m is exact in a
  // double and m * m * x is exact as the pair (p, e) from an FMA; ties cannot occur (x would
  // have to be 1 / m^2).
  float r = in_mode<float>(FE_TONEAREST, [&] {
    volatile double d = 1.0 / std::sqrt(static_cast<double>(x));
    return static_cast<float>(d);
  });
  const auto below_one = [x](double m) {  // sign of m * m * x - 1: -1, 0, 1
    const double m2 = m * m;
    const double p = m2 * static_cast<double>(x);
    const double e = std::fma(m2, static_cast<double>(x), -p);
    if (p != 1.0) return p < 1.0 ? -1 : 1;
    return e < 0.0 ? -1 : (e > 0.0 ? 1 : 0);
  };
  const float up = std::nextafter(r, std::numeric_limits<float>::infinity());
  const float down = std::nextafter(r, 0.0f);
  if (below_one((static_cast<double>(r) + up) / 2) < 0) return up;  // y above the upper midpoint
  if (below_one((static_cast<double>(r) + down) / 2) > 0) return down;  // y below the lower one
  return r;
}
