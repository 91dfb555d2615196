// The emulator's stand-in for CUDA's cuda_bf16.h: __nv_bfloat16 and __nv_bfloat162 as host
// types, with the conversions braid's kernels use, each exact round-to-nearest-even.
//
// Like the cuda_fp16.h stand-in next to it: storage and conversion only (arithmetic is deleted,
// so code relying on CUDA's bf16 operators fails to compile rather than silently computing in
// float), and the types live in braid::simt::bf16 behind using-declarations so that their
// symbols never clash with the real header's in a binary that links both.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_fp16.h"  // CUDA's cuda_bf16.h includes cuda_fp16.h too; code may rely on it

namespace braid::simt::bf16 {

// binary32 -> bfloat16 (binary32's exponent, 8-bit significand), round to nearest, ties to
// even; NaN -> the canonical NaN 0x7fff (what CUDA's conversion returns). The two formats share
// the exponent range, so rounding is one carry-propagating add on the bit pattern: a carry out
// of the significand bumps the exponent, and past the largest finite value reaches infinity.
inline uint16_t float_to_bf16_bits_rn(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
}

// Rounding toward zero is truncation of the pattern.
inline uint16_t float_to_bf16_bits_rz(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return static_cast<uint16_t>(x >> 16);
}

// bfloat16 -> binary32 is exact: the pattern is the float's top half.
inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

struct __nv_bfloat16 {
  unsigned short __x;

  __nv_bfloat16() = default;
  // Implicit, as CUDA's: round to nearest even.
  __nv_bfloat16(float f) : __x(float_to_bf16_bits_rn(f)) {}
  operator float() const { return bf16_bits_to_float(__x); }
};

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x;  // the low 16 bits of the 32-bit pair
  __nv_bfloat16 y;  // the high 16 bits
};

// See the file comment: no bf16 arithmetic in the emulator.
__nv_bfloat16 operator+(__nv_bfloat16, __nv_bfloat16) = delete;
__nv_bfloat16 operator-(__nv_bfloat16, __nv_bfloat16) = delete;
__nv_bfloat16 operator*(__nv_bfloat16, __nv_bfloat16) = delete;
__nv_bfloat16 operator/(__nv_bfloat16, __nv_bfloat16) = delete;
__nv_bfloat162 operator+(__nv_bfloat162, __nv_bfloat162) = delete;
__nv_bfloat162 operator-(__nv_bfloat162, __nv_bfloat162) = delete;
__nv_bfloat162 operator*(__nv_bfloat162, __nv_bfloat162) = delete;
__nv_bfloat162 operator/(__nv_bfloat162, __nv_bfloat162) = delete;

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  __nv_bfloat16 b;
  b.__x = bits;
  return b;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) {
  return b.__x;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __ushort_as_bfloat16(float_to_bf16_bits_rn(f));
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return __float2bfloat16_rn(f);
}
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
  return __ushort_as_bfloat16(float_to_bf16_bits_rz(f));
}
inline float __bfloat162float(__nv_bfloat16 b) {
  return bf16_bits_to_float(b.__x);
}

inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return __nv_bfloat162{lo, hi};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __nv_bfloat162{__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}
inline __nv_bfloat162 __float2bfloat162_rn(float f) {
  return __floats2bfloat162_rn(f, f);
}
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) {
  return b.x;
}
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) {
  return b.y;
}
inline float __low2float(__nv_bfloat162 b) {
  return __bfloat162float(b.x);
}
inline float __high2float(__nv_bfloat162 b) {
  return __bfloat162float(b.y);
}

}  // namespace braid::simt::bf16

using braid::simt::bf16::__bfloat162float;
using braid::simt::bf16::__bfloat16_as_ushort;
using braid::simt::bf16::__float2bfloat16;
using braid::simt::bf16::__float2bfloat162_rn;
using braid::simt::bf16::__float2bfloat16_rn;
using braid::simt::bf16::__float2bfloat16_rz;
using braid::simt::bf16::__floats2bfloat162_rn;
using braid::simt::bf16::__halves2bfloat162;
using braid::simt::bf16::__high2bfloat16;
using braid::simt::bf16::__high2float;
using braid::simt::bf16::__low2bfloat16;
using braid::simt::bf16::__low2float;
using braid::simt::bf16::__nv_bfloat16;
using braid::simt::bf16::__nv_bfloat162;
using braid::simt::bf16::__ushort_as_bfloat16;
