// The explicitly rounded intrinsics against a float64 reference in every rounding mode. The
// reference never sets the FPU's rounding mode: it brackets the exact result between two
// adjacent floats by exact comparisons (each done in double or integer arithmetic, where it
// cannot round), then picks the neighbour the mode asks for.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "simt/builtins_math.h"

namespace {

enum class Mode { rn, rz, ru, rd };
constexpr Mode kModes[] = {Mode::rn, Mode::rz, Mode::ru, Mode::rd};
constexpr float kInf = std::numeric_limits<float>::infinity();

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;  // also tells +0 from -0
}
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Rounds the exact value v to float in `mode`, given an approximation and cmp(c) =
// sign(c - v) for any float c or midpoint of two adjacent floats (exact in a double).
template <class Cmp>
float round_by_comparison(float approx, Mode mode, Cmp cmp) {
  if (std::isinf(approx) && cmp(static_cast<double>(approx)) == 0) return approx;
  float lo = approx, hi = approx;
  const int c0 = cmp(static_cast<double>(approx));
  if (c0 == 0) return approx;
  if (c0 > 0)
    lo = std::nextafter(approx, -kInf);
  else
    hi = std::nextafter(approx, kInf);
  while (cmp(static_cast<double>(lo)) > 0) hi = lo, lo = std::nextafter(lo, -kInf);
  while (cmp(static_cast<double>(hi)) < 0) lo = hi, hi = std::nextafter(hi, kInf);
  if (cmp(static_cast<double>(lo)) == 0) return lo;
  if (cmp(static_cast<double>(hi)) == 0) return hi;
  switch (mode) {
    case Mode::rd:
      return lo;
    case Mode::ru:
      return hi;
    case Mode::rz:
      return hi <= 0.0f ? hi : lo;
    case Mode::rn: {
      // IEEE's overflow threshold: past the largest float by half its ulp.
      const double ulp_max = std::ldexp(1.0, 104);
      const double m = std::isinf(hi)   ? static_cast<double>(lo) + ulp_max / 2
                       : std::isinf(lo) ? static_cast<double>(hi) - ulp_max / 2
                                        : (static_cast<double>(lo) + hi) / 2;
      const int cm = cmp(m);
      if (cm < 0) return hi;
      if (cm > 0) return lo;
      uint32_t bits;
      std::memcpy(&bits, &lo, 4);
      return (bits & 1u) == 0 ? lo : hi;  // ties to even
    }
  }
  return approx;
}

int sign(double x) {
  return (x > 0) - (x < 0);
}

// The exact value s + e (s = fl(x + y), e the exact error, Knuth's TwoSum).
struct Exact {
  double s, e;
};
Exact two_sum(double x, double y) {
  const double s = x + y;
  const double yy = s - x;
  return {s, (x - (s - yy)) + (y - yy)};
}
float round_exact(Exact v, Mode mode) {
  return round_by_comparison(static_cast<float>(v.s), mode,
                             [v](double c) { return sign((c - v.s) - v.e); });
}
// An exact zero sum of two addends: zeros of one sign keep it; otherwise +0, or -0 when
// rounding toward minus infinity.
float exact_zero(double a, double b, Mode mode) {
  if (a == 0 && b == 0 && std::signbit(a) == std::signbit(b)) return std::signbit(a) ? -0.0f : 0.0f;
  return mode == Mode::rd ? -0.0f : 0.0f;
}

float ref_add(float x, float y, Mode mode) {
  if (!std::isfinite(x) || !std::isfinite(y)) return x + y;
  const Exact v = two_sum(x, y);
  if (v.s == 0 && v.e == 0) return exact_zero(x, y, mode);
  return round_exact(v, mode);
}
float ref_mul(float x, float y, Mode mode) {
  if (!std::isfinite(x) || !std::isfinite(y)) return x * y;
  return round_exact({static_cast<double>(x) * y, 0.0}, mode);  // 48 bits: exact
}
float ref_fma(float x, float y, float z, Mode mode) {
  if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z))
    return static_cast<float>(static_cast<double>(x) * y + z);
  const double p = static_cast<double>(x) * y;
  const Exact v = two_sum(p, z);
  if (v.s == 0 && v.e == 0) return exact_zero(p, z, mode);
  return round_exact(v, mode);
}
float ref_div(float x, float y, Mode mode) {
  if (!std::isfinite(x) || !std::isfinite(y) || y == 0 || x == 0) return x / y;
  // c vs x / y  <=>  c * y vs x (times the sign of y); c * y is exact in a double.
  return round_by_comparison(static_cast<float>(static_cast<double>(x) / y), mode,
                             [x, y](double c) { return sign(c * y - x) * sign(y); });
}
float ref_sqrt(float x, Mode mode) {
  if (!(x > 0) || std::isinf(x)) return std::sqrt(x);
  return round_by_comparison(static_cast<float>(std::sqrt(static_cast<double>(x))), mode,
                             [x](double c) { return sign(c * c - x); });
}
// 1/sqrt(x) by integer arithmetic: c = mc 2^ec, x = mx 2^ex with integer significands, and
// c^2 x vs 1 compares mc^2 mx (at most 76 bits) with 2^-(2 ec + ex).
float ref_rsqrt(float x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0) return std::copysign(kInf, x);
  if (std::isinf(x)) return 0.0f;
  const auto decompose = [](double v, unsigned __int128* m, int* e) {
    int exp2 = 0;
    const double f = std::frexp(v, &exp2);  // v = f 2^exp2, f in [0.5, 1)
    *m = static_cast<unsigned __int128>(std::ldexp(f, 60));
    *e = exp2 - 60;
  };
  const auto cmp = [&](double c) {
    unsigned __int128 mc, mx;
    int ec, ex;
    decompose(c, &mc, &ec);
    decompose(x, &mx, &ex);
    // Strip trailing zero bits so the products fit.
    while ((mc & 1) == 0) mc >>= 1, ++ec;
    while ((mx & 1) == 0) mx >>= 1, ++ex;
    const unsigned __int128 product = mc * mc * mx;
    const int shift = -(2 * ec + ex);  // compare product with 2^shift
    if (shift < 0) return 1;
    if (shift >= 127) return -1;
    const unsigned __int128 one = static_cast<unsigned __int128>(1) << shift;
    return product > one ? 1 : (product < one ? -1 : 0);
  };
  return round_by_comparison(static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))), Mode::rn,
                             cmp);
}

// Float to integer: the mode's integral value (ties to even by hand), saturated; NaN gives 0.
template <class I>
I ref_to_int(double x, Mode mode) {
  if (std::isnan(x)) return 0;
  double r = 0;
  switch (mode) {
    case Mode::rz:
      r = std::trunc(x);
      break;
    case Mode::ru:
      r = std::ceil(x);
      break;
    case Mode::rd:
      r = std::floor(x);
      break;
    case Mode::rn: {
      const double f = std::floor(x), frac = x - f;  // exact
      r = frac > 0.5 ? f + 1 : (frac < 0.5 ? f : (std::fmod(f, 2.0) == 0 ? f : f + 1));
      break;
    }
  }
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

// An integer (exact in a long double) to float.
float ref_from_integer(long double v, Mode mode) {
  return round_by_comparison(static_cast<float>(v), mode, [v](double c) {
    const long double cl = c;
    return (cl > v) - (cl < v);
  });
}

class Floats {
 public:
  explicit Floats(uint32_t seed) : rng_(seed) {}
  // Any bit pattern but NaN, one in eight a special value.
  float next() {
    static const float specials[] = {0.0f,
                                     -0.0f,
                                     1.0f,
                                     -1.0f,
                                     0.5f,
                                     3.0f,
                                     kInf,
                                     -kInf,
                                     std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::min(),
                                     std::numeric_limits<float>::denorm_min(),
                                     -std::numeric_limits<float>::denorm_min(),
                                     16777216.0f,
                                     16777218.0f,
                                     1e-40f};
    if (rng_() % 8 == 0) return specials[rng_() % std::size(specials)];
    float f;
    do {
      const uint32_t bits = static_cast<uint32_t>(rng_());
      std::memcpy(&f, &bits, 4);
    } while (std::isnan(f));
    // Half of them near 1 in magnitude, so that sums of two keep low bits and ties happen.
    if (rng_() % 2 == 0) {
      int exponent = 0;
      f = std::ldexp(std::frexp(f, &exponent), static_cast<int>(rng_() % 20) - 10);
    }
    return f;
  }

 private:
  std::mt19937 rng_;
};

using Binary = float (*)(float, float);
struct BinaryCase {
  const char* name;
  Binary ops[4];  // rn, rz, ru, rd
  float (*reference)(float, float, Mode);
};

float ref_sub(float x, float y, Mode mode) {
  return ref_add(x, -y, mode);
}
float ref_rcp(float x, float, Mode mode) {
  return ref_div(1.0f, x, mode);
}
float ref_sqrt2(float x, float, Mode mode) {
  return ref_sqrt(std::fabs(x), mode);
}
float rcp_rn(float x, float) {
  return __frcp_rn(x);
}
float rcp_rz(float x, float) {
  return __frcp_rz(x);
}
float rcp_ru(float x, float) {
  return __frcp_ru(x);
}
float rcp_rd(float x, float) {
  return __frcp_rd(x);
}
float sqrt_rn(float x, float) {
  return __fsqrt_rn(std::fabs(x));
}
float sqrt_rz(float x, float) {
  return __fsqrt_rz(std::fabs(x));
}
float sqrt_ru(float x, float) {
  return __fsqrt_ru(std::fabs(x));
}
float sqrt_rd(float x, float) {
  return __fsqrt_rd(std::fabs(x));
}

TEST(SimtRounding, FloatArithmeticInEveryModeMatchesTheExactReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const BinaryCase cases[] = {
      {"__fadd", {__fadd_rn, __fadd_rz, __fadd_ru, __fadd_rd}, ref_add},
      {"__fsub", {__fsub_rn, __fsub_rz, __fsub_ru, __fsub_rd}, ref_sub},
      {"__fmul", {__fmul_rn, __fmul_rz, __fmul_ru, __fmul_rd}, ref_mul},
      {"__fdiv", {__fdiv_rn, __fdiv_rz, __fdiv_ru, __fdiv_rd}, ref_div},
      {"__frcp", {rcp_rn, rcp_rz, rcp_ru, rcp_rd}, ref_rcp},
      {"__fsqrt", {sqrt_rn, sqrt_rz, sqrt_ru, sqrt_rd}, ref_sqrt2},
  };
  for (const BinaryCase& c : cases) {
    Floats floats(42);
    int inexact = 0;
    for (int i = 0; i < 20000; ++i) {
      const float x = floats.next(), y = floats.next();
      const float rn = c.reference(x, y, Mode::rn), rd = c.reference(x, y, Mode::rd);
      if (!same(rn, rd)) ++inexact;
      for (int m = 0; m < 4; ++m) {
        const float got = c.ops[m](x, y), want = c.reference(x, y, kModes[m]);
        ASSERT_TRUE(same(got, want)) << c.name << " mode " << m << " of " << x << ", " << y
                                     << ": got " << got << " want " << want;
      }
    }
    EXPECT_GT(inexact, 1000) << c.name << ": the samples must exercise rounding";
    EXPECT_EQ(std::fegetround(), FE_TONEAREST) << c.name << " left its rounding mode set";
  }
}

TEST(SimtRounding, FusedMultiplyAddRoundsOnceInEveryMode) {
  Floats floats(7);
  float (*const ops[4])(float, float, float) = {__fmaf_rn, __fmaf_rz, __fmaf_ru, __fmaf_rd};
  int differs_from_two_roundings = 0;
  for (int i = 0; i < 20000; ++i) {
    const float x = floats.next(), y = floats.next(), z = floats.next();
    for (int m = 0; m < 4; ++m) {
      const float got = ops[m](x, y, z), want = ref_fma(x, y, z, kModes[m]);
      ASSERT_TRUE(same(got, want)) << "mode " << m << " of " << x << " * " << y << " + " << z
                                   << ": got " << got << " want " << want;
    }
    if (!same(__fmaf_rn(x, y, z), __fadd_rn(__fmul_rn(x, y), z))) ++differs_from_two_roundings;
  }
  EXPECT_GT(differs_from_two_roundings, 100);
}

TEST(SimtRounding, ReciprocalSquareRootIsCorrectlyRounded) {
  Floats floats(9);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::fabs(floats.next());
    ASSERT_TRUE(same(__frsqrt_rn(x), ref_rsqrt(x))) << x;
  }
  EXPECT_TRUE(same(__frsqrt_rn(4.0f), 0.5f));
  EXPECT_TRUE(same(__frsqrt_rn(-0.0f), -kInf));
}

TEST(SimtRounding, DoubleArithmeticInEveryMode) {
  // Doubles: the exact results of float operands are representable, so the mode shows in the
  // last bit of float-exact inputs scaled to need rounding: 1/3, sums of unequal magnitudes.
  double (*const add[4])(double, double) = {__dadd_rn, __dadd_rz, __dadd_ru, __dadd_rd};
  double (*const div[4])(double, double) = {__ddiv_rn, __ddiv_rz, __ddiv_ru, __ddiv_rd};
  const double third_lo = 0x1.5555555555555p-2, third_hi = 0x1.5555555555556p-2;
  EXPECT_TRUE(same(div[0](1.0, 3.0), third_lo));
  EXPECT_TRUE(same(div[1](1.0, 3.0), third_lo));
  EXPECT_TRUE(same(div[2](1.0, 3.0), third_hi));
  EXPECT_TRUE(same(div[3](1.0, 3.0), third_lo));
  EXPECT_TRUE(same(div[1](-1.0, 3.0), -third_lo));
  EXPECT_TRUE(same(div[3](-1.0, 3.0), -third_hi));
  const double tiny = 0x1p-60;
  EXPECT_TRUE(same(add[0](1.0, tiny), 1.0));
  EXPECT_TRUE(same(add[2](1.0, tiny), std::nextafter(1.0, 2.0)));
  EXPECT_TRUE(same(add[3](1.0, -tiny), std::nextafter(1.0, 0.0)));
  EXPECT_TRUE(same(add[1](1.0, -tiny), std::nextafter(1.0, 0.0)));
  // sqrt(2) between the nearest double r and its neighbour: r * r - 2, exact by an FMA, says
  // on which side r lies.
  const double r = std::sqrt(2.0);
  const bool above = std::fma(r, r, -2.0) > 0;
  EXPECT_TRUE(same(__dsqrt_ru(2.0), above ? r : std::nextafter(r, 3.0)));
  EXPECT_TRUE(same(__dsqrt_rd(2.0), above ? std::nextafter(r, 0.0) : r));
  EXPECT_TRUE(same(__dsqrt_rz(2.0), __dsqrt_rd(2.0)));
  EXPECT_TRUE(same(__dsqrt_rn(2.0), r));
  // (1 + 2^-52)^2 - 1 = 2^-51 + 2^-104 needs 54 bits: rounded once, not twice.
  EXPECT_TRUE(same(__fma_rz(1.0 + 0x1p-52, 1.0 + 0x1p-52, -1.0), 0x1p-51));
  EXPECT_TRUE(same(__fma_ru(1.0 + 0x1p-52, 1.0 + 0x1p-52, -1.0), 0x1p-51 + 0x1p-103));
  EXPECT_TRUE(same(__dadd_rd(1.0, -1.0), -0.0));
  EXPECT_TRUE(same(__dadd_rn(1.0, -1.0), 0.0));
}

TEST(SimtRounding, ConversionsInEveryMode) {
  std::mt19937 rng(3);
  int (*const f2i[4])(float) = {__float2int_rn, __float2int_rz, __float2int_ru, __float2int_rd};
  unsigned (*const f2u[4])(float) = {__float2uint_rn, __float2uint_rz, __float2uint_ru,
                                     __float2uint_rd};
  long long (*const f2ll[4])(float) = {__float2ll_rn, __float2ll_rz, __float2ll_ru, __float2ll_rd};
  int (*const d2i[4])(double) = {__double2int_rn, __double2int_rz, __double2int_ru,
                                 __double2int_rd};
  float (*const d2f[4])(double) = {__double2float_rn, __double2float_rz, __double2float_ru,
                                   __double2float_rd};
  float (*const i2f[4])(int) = {__int2float_rn, __int2float_rz, __int2float_ru, __int2float_rd};
  float (*const u2f[4])(unsigned) = {__uint2float_rn, __uint2float_rz, __uint2float_ru,
                                     __uint2float_rd};
  float (*const ll2f[4])(long long) = {__ll2float_rn, __ll2float_rz, __ll2float_ru, __ll2float_rd};
  float (*const ull2f[4])(unsigned long long) = {__ull2float_rn, __ull2float_rz, __ull2float_ru,
                                                 __ull2float_rd};
  const float edge[] = {
      0.5f,  1.5f,          2.5f,          -0.5f,          -1.5f,
      -2.5f, 2147483520.0f, 2147483648.0f, -2147483648.0f, 4294967296.0f,
      1e20f, -1e20f,        kInf,          -kInf,          std::numeric_limits<float>::quiet_NaN(),
      -0.0f, 0.49999997f};
  for (int i = 0; i < 40000; ++i) {
    float x;
    if (i < static_cast<int>(std::size(edge))) {
      x = edge[i];
    } else {
      x = std::ldexp(static_cast<float>(rng() % 100000) / 997.0f,
                     static_cast<int>(rng() % 80) - 40);
      if (rng() % 2) x = -x;
      if (rng() % 4 == 0) x = std::round(x * 2) / 2;  // halves: the ties
    }
    const double d = static_cast<double>(x) * (1 + 1e-12);
    const auto u = static_cast<unsigned long long>(rng()) << 32 | rng();
    const auto v = static_cast<long long>(u >> (1 + rng() % 40)) * (rng() % 2 ? 1 : -1);
    for (int m = 0; m < 4; ++m) {
      const Mode mode = kModes[m];
      ASSERT_EQ(f2i[m](x), ref_to_int<int>(x, mode)) << x << " mode " << m;
      ASSERT_EQ(f2u[m](x), ref_to_int<unsigned>(x, mode)) << x << " mode " << m;
      ASSERT_EQ(f2ll[m](x), ref_to_int<long long>(x, mode)) << x << " mode " << m;
      ASSERT_EQ(d2i[m](d), ref_to_int<int>(d, mode)) << d << " mode " << m;
      if (std::isfinite(d)) {
        const float want =
            round_by_comparison(static_cast<float>(d), mode, [d](double c) { return sign(c - d); });
        ASSERT_TRUE(same(d2f[m](d), want)) << d << " mode " << m;
      }
      const int iv = static_cast<int>(v);
      ASSERT_TRUE(same(i2f[m](iv), ref_from_integer(iv, mode))) << iv << " mode " << m;
      ASSERT_TRUE(
          same(u2f[m](static_cast<unsigned>(u)), ref_from_integer(static_cast<unsigned>(u), mode)));
      ASSERT_TRUE(same(ll2f[m](v), ref_from_integer(v, mode))) << v << " mode " << m;
      ASSERT_TRUE(same(ull2f[m](u), ref_from_integer(u, mode))) << u << " mode " << m;
    }
  }
  EXPECT_EQ(__float2int_rn(2.5f), 2);
  EXPECT_EQ(__float2int_rn(3.5f), 4);
  EXPECT_EQ(__float2int_rd(-0.5f), -1);
  EXPECT_EQ(__float2int_rz(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(__float2uint_rn(-3.0f), 0u);
  EXPECT_EQ(__float2int_ru(1e10f), std::numeric_limits<int>::max());
}

TEST(SimtRounding, BitCastsAndSaturate) {
  EXPECT_EQ(__float_as_int(1.0f), 0x3f800000);
  EXPECT_TRUE(same(__int_as_float(0x7fc00000), std::numeric_limits<float>::quiet_NaN()));
  EXPECT_EQ(__double_as_longlong(1.0), 0x3ff0000000000000ll);
  EXPECT_EQ(__double2hiint(1.0), 0x3ff00000);
  EXPECT_TRUE(same(__hiloint2double(0x3ff00000, 0), 1.0));
  EXPECT_TRUE(same(__saturatef(std::numeric_limits<float>::quiet_NaN()), 0.0f));
  EXPECT_TRUE(same(__saturatef(1.5f), 1.0f));
  EXPECT_TRUE(same(__saturatef(-2.0f), 0.0f));
  EXPECT_EQ(__popc(0xf0f0u), 8);
  EXPECT_EQ(__clz(1), 31);
  EXPECT_EQ(__ffs(8), 4);
  EXPECT_EQ(__brev(1u), 0x80000000u);
  EXPECT_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x4321u), 0x44332211u);
  EXPECT_EQ(__umulhi(0xffffffffu, 0xffffffffu), 0xfffffffeu);
  EXPECT_EQ(__funnelshift_l(0x80000000u, 1u, 1u), 3u);
}

}  // namespace
