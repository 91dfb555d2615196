// Kernel-side arithmetic built-ins: the explicitly rounded intrinsics (__fadd_rn, __fmaf_rz,
// __float2int_rd, ...) with their exact IEEE 754 meaning in every rounding mode, bit casts,
// integer intrinsics, CUDA's min/max overloads and the fast-math names (on the host's libm).
#pragma once

#include <math.h>  // the global-namespace expf, fmaxf, isnan, ... kernels call unqualified

#include <bit>
#include <cstdint>

// ---- rounded arithmetic (rounding.cpp) ---------------------------------------------------------

#define BRAID_SIMT_ROUNDED(declare) declare(rn) declare(rz) declare(ru) declare(rd)

#define BRAID_SIMT_FLOAT_OPS(mode)                   \
  float __fadd_##mode(float x, float y);             \
  float __fsub_##mode(float x, float y);             \
  float __fmul_##mode(float x, float y);             \
  float __fdiv_##mode(float x, float y);             \
  float __fmaf_##mode(float x, float y, float z);    \
  float __frcp_##mode(float x);                      \
  float __fsqrt_##mode(float x);                     \
  double __dadd_##mode(double x, double y);          \
  double __dsub_##mode(double x, double y);          \
  double __dmul_##mode(double x, double y);          \
  double __ddiv_##mode(double x, double y);          \
  double __fma_##mode(double x, double y, double z); \
  double __drcp_##mode(double x);                    \
  double __dsqrt_##mode(double x);
BRAID_SIMT_ROUNDED(BRAID_SIMT_FLOAT_OPS)
#undef BRAID_SIMT_FLOAT_OPS

// 1 / sqrt(x), correctly rounded to nearest.
float __frsqrt_rn(float x);

// Float to integer conversions in the named mode. Out of range the result saturates to the
// type's limits and NaN gives 0, as PTX's cvt does (CUDA calls these cases undefined).
#define BRAID_SIMT_CONVERSIONS(mode)                \
  int __float2int_##mode(float x);                  \
  unsigned __float2uint_##mode(float x);            \
  long long __float2ll_##mode(float x);             \
  unsigned long long __float2ull_##mode(float x);   \
  int __double2int_##mode(double x);                \
  unsigned __double2uint_##mode(double x);          \
  long long __double2ll_##mode(double x);           \
  unsigned long long __double2ull_##mode(double x); \
  float __double2float_##mode(double x);            \
  float __int2float_##mode(int x);                  \
  float __uint2float_##mode(unsigned x);            \
  float __ll2float_##mode(long long x);             \
  float __ull2float_##mode(unsigned long long x);   \
  double __ll2double_##mode(long long x);           \
  double __ull2double_##mode(unsigned long long x);
BRAID_SIMT_ROUNDED(BRAID_SIMT_CONVERSIONS)
#undef BRAID_SIMT_CONVERSIONS
#undef BRAID_SIMT_ROUNDED

// Exact conversions (every int fits a double).
inline double __int2double_rn(int x) {
  return static_cast<double>(x);
}
inline double __uint2double_rn(unsigned x) {
  return static_cast<double>(x);
}

// ---- bit casts ---------------------------------------------------------------------------------

inline int __float_as_int(float x) {
  return std::bit_cast<int>(x);
}
inline float __int_as_float(int x) {
  return std::bit_cast<float>(x);
}
inline unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float __uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}
inline long long __double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}
inline double __longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}
inline int __double2hiint(double x) {
  return static_cast<int>(std::bit_cast<unsigned long long>(x) >> 32);
}
inline int __double2loint(double x) {
  return static_cast<int>(static_cast<uint32_t>(std::bit_cast<unsigned long long>(x)));
}
inline double __hiloint2double(int hi, int lo) {
  return std::bit_cast<double>((static_cast<unsigned long long>(static_cast<uint32_t>(hi)) << 32) |
                               static_cast<uint32_t>(lo));
}

// ---- integer intrinsics ------------------------------------------------------------------------

inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
  return __builtin_ffsll(x);
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
inline int __mulhi(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) * y) >> 32);
}
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}
inline long long __mul64hi(long long x, long long y) {
  return static_cast<long long>((static_cast<__int128>(x) * y) >> 64);
}
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}
// The low 24 bits of each operand (sign-extended for __mul24), the low 32 bits of the product.
inline int __mul24(int x, int y) {
  const long long a = static_cast<int>(static_cast<unsigned>(x) << 8) >> 8;
  const long long b = static_cast<int>(static_cast<unsigned>(y) << 8) >> 8;
  return static_cast<int>(static_cast<uint32_t>(a * b));
}
inline unsigned __umul24(unsigned x, unsigned y) {
  return (x & 0xffffffu) * (y & 0xffffffu);
}
// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {y, x} (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift < 32u ? shift : 32u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31u));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift < 32u ? shift : 32u));
}
inline int __hadd(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) + y) >> 1);
}
inline int __rhadd(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1);
}
inline unsigned __uhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y) >> 1);
}
inline unsigned __urhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y + 1) >> 1);
}
inline unsigned __sad(int x, int y, unsigned z) {
  return static_cast<unsigned>(x > y ? static_cast<long long>(x) - y
                                     : static_cast<long long>(y) - x) +
         z;
}
inline unsigned __usad(unsigned x, unsigned y, unsigned z) {
  return (x > y ? x - y : y - x) + z;
}

// ---- min / max, as CUDA overloads them (floating point: fmin / fmax, which ignore a NaN) -------

#define BRAID_SIMT_MINMAX(A, B, R)                                                        \
  inline R min(A a, B b) {                                                                \
    return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); \
  }                                                                                       \
  inline R max(A a, B b) {                                                                \
    return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); \
  }
BRAID_SIMT_MINMAX(int, int, int)
BRAID_SIMT_MINMAX(unsigned, unsigned, unsigned)
BRAID_SIMT_MINMAX(int, unsigned, unsigned)
BRAID_SIMT_MINMAX(unsigned, int, unsigned)
BRAID_SIMT_MINMAX(long, long, long)
BRAID_SIMT_MINMAX(unsigned long, unsigned long, unsigned long)
BRAID_SIMT_MINMAX(long, unsigned long, unsigned long)
BRAID_SIMT_MINMAX(unsigned long, long, unsigned long)
BRAID_SIMT_MINMAX(long long, long long, long long)
BRAID_SIMT_MINMAX(unsigned long long, unsigned long long, unsigned long long)
BRAID_SIMT_MINMAX(long long, unsigned long long, unsigned long long)
BRAID_SIMT_MINMAX(unsigned long long, long long, unsigned long long)
#undef BRAID_SIMT_MINMAX
inline float min(float a, float b) {
  return fminf(a, b);
}
inline float max(float a, float b) {
  return fmaxf(a, b);
}
inline double min(double a, double b) {
  return fmin(a, b);
}
inline double max(double a, double b) {
  return fmax(a, b);
}
inline double min(float a, double b) {
  return fmin(a, b);
}
inline double max(float a, double b) {
  return fmax(a, b);
}
inline double min(double a, float b) {
  return fmin(a, b);
}
inline double max(double a, float b) {
  return fmax(a, b);
}
inline unsigned umin(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline unsigned umax(unsigned a, unsigned b) {
  return a > b ? a : b;
}
inline long long llmin(long long a, long long b) {
  return a < b ? a : b;
}
inline long long llmax(long long a, long long b) {
  return a > b ? a : b;
}
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

// ---- device math beyond libm, and the fast (approximate on the device) names --------------------

inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}
inline float rcbrtf(float x) {
  return 1.0f / cbrtf(x);
}
inline double rcbrt(double x) {
  return 1.0 / cbrt(x);
}
inline float sinpif(float x) {
  return static_cast<float>(sin(M_PI * static_cast<double>(x)));
}
inline float cospif(float x) {
  return static_cast<float>(cos(M_PI * static_cast<double>(x)));
}
inline float normcdff(float x) {
  return 0.5f * erfcf(-x * static_cast<float>(M_SQRT1_2));
}
inline double normcdf(double x) {
  return 0.5 * erfc(-x * M_SQRT1_2);
}
inline float fdividef(float x, float y) {
  return x / y;
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float __expf(float x) {
  return expf(x);
}
inline float __exp10f(float x) {
  return exp10f(x);
}
inline float __logf(float x) {
  return logf(x);
}
inline float __log2f(float x) {
  return log2f(x);
}
inline float __log10f(float x) {
  return log10f(x);
}
inline float __sinf(float x) {
  return sinf(x);
}
inline float __cosf(float x) {
  return cosf(x);
}
inline float __tanf(float x) {
  return tanf(x);
}
inline void __sincosf(float x, float* s, float* c) {
  sincosf(x, s, c);
}
inline float __powf(float x, float y) {
  return powf(x, y);
}
inline float __saturatef(float x) {
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f;
}  // NaN: 0
