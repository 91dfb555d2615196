// The emulator's stand-in for CUDA's cuda_fp16.h: __half and __half2 as host types, with the
// conversions braid's kernels use, each exact IEEE 754 binary16 round-to-nearest-even.
//
// Scope: storage and conversion only. Arithmetic on __half is deleted, so a kernel that relies on
// CUDA's half arithmetic fails to compile here instead of silently computing in float through
// the implicit conversions (braid computes in fp32: DESIGN.md section 8).
//
// The types live in braid::simt::fp16 and are brought into the global namespace by
// using-declarations: their mangled names then differ from the real header's, so a binary that
// also links nvcc-compiled code (the host tests of a CUDA build) has no clashing inline symbols.
#pragma once

#include <cstdint>
#include <cstring>

namespace braid::simt::fp16 {

// binary32 -> binary16, round to nearest, ties to even; NaN -> the canonical NaN 0x7fff (what
// CUDA's conversion returns), overflow -> infinity, gradual underflow through the subnormals.
inline uint16_t float_to_half_bits_rn(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  // 65520 = 0x477ff000 is the midpoint between the largest half (65504, odd significand) and
  // 2^16; ties go to the even neighbour, which is past the range: infinity from there up.
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax < 0x38800000u) {  // below 2^-14, the smallest normal half: a subnormal or zero
    // 2^-25 is the midpoint between 0 and the smallest subnormal 2^-24; it ties to 0.
    if (ax <= 0x33000000u) return sign;
    const uint32_t exponent = ax >> 23;  // 102..112 here
    const uint32_t significand = (ax & 0x7fffffu) | 0x800000u;
    // value = significand * 2^(exponent - 150); in units of 2^-24 that is significand >> shift.
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t m = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (m & 1u))) ++m;  // may carry into the smallest normal
    return sign | static_cast<uint16_t>(m);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit significand to 10 bits; a carry
  // out of the significand correctly bumps the exponent (never to infinity, excluded above).
  const uint32_t rebased = ax - (112u << 23);
  uint32_t h = rebased >> 13;
  const uint32_t rest = rebased & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

// binary32 -> binary16 rounding toward zero (truncation), for __float2half_rz.
inline uint16_t float_to_half_bits_rz(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  if (ax == 0x7f800000u) return sign | 0x7c00u;
  if (ax >= 0x47800000u) return sign | 0x7bffu;  // >= 2^16 truncates to the largest finite
  if (ax < 0x38800000u) {
    if (ax < 0x33800000u) return sign;  // below 2^-24
    const uint32_t exponent = ax >> 23;
    const uint32_t significand = (ax & 0x7fffffu) | 0x800000u;
    return sign | static_cast<uint16_t>(significand >> (126 - exponent));
  }
  return sign | static_cast<uint16_t>((ax - (112u << 23)) >> 13);
}

// binary16 -> binary32 is exact: every half is a float.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t significand = h & 0x3ffu;
  uint32_t x;
  if (exponent == 0x1f) {
    x = sign | 0x7f800000u | (significand << 13);  // infinity, or NaN with its payload
  } else if (exponent != 0) {
    x = sign | ((exponent + 112u) << 23) | (significand << 13);
  } else if (significand == 0) {
    x = sign;
  } else {
    // Subnormal: normalise. value = significand * 2^-24.
    int e = -1;
    do {
      significand <<= 1;
      ++e;
    } while ((significand & 0x400u) == 0);
    x = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((significand & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

struct __half {
  unsigned short __x;

  __half() = default;
  // Implicit, as CUDA's: round to nearest even.
  __half(float f) : __x(float_to_half_bits_rn(f)) {}
  operator float() const { return half_bits_to_float(__x); }
};

struct alignas(4) __half2 {
  __half x;  // the low 16 bits of the 32-bit pair
  __half y;  // the high 16 bits
};

// See the file comment: no half arithmetic in the emulator.
__half operator+(__half, __half) = delete;
__half operator-(__half, __half) = delete;
__half operator*(__half, __half) = delete;
__half operator/(__half, __half) = delete;
__half2 operator+(__half2, __half2) = delete;
__half2 operator-(__half2, __half2) = delete;
__half2 operator*(__half2, __half2) = delete;
__half2 operator/(__half2, __half2) = delete;

inline __half __ushort_as_half(unsigned short bits) {
  __half h;
  h.__x = bits;
  return h;
}
inline unsigned short __half_as_ushort(__half h) {
  return h.__x;
}

inline __half __float2half_rn(float f) {
  return __ushort_as_half(float_to_half_bits_rn(f));
}
inline __half __float2half(float f) {
  return __float2half_rn(f);
}
inline __half __float2half_rz(float f) {
  return __ushort_as_half(float_to_half_bits_rz(f));
}
inline float __half2float(__half h) {
  return half_bits_to_float(h.__x);
}

inline __half2 __halves2half2(__half lo, __half hi) {
  return __half2{lo, hi};
}
inline __half2 __floats2half2_rn(float lo, float hi) {
  return __half2{__float2half_rn(lo), __float2half_rn(hi)};
}
inline __half2 __float2half2_rn(float f) {
  return __floats2half2_rn(f, f);
}
inline __half __low2half(__half2 h) {
  return h.x;
}
inline __half __high2half(__half2 h) {
  return h.y;
}
inline float __low2float(__half2 h) {
  return __half2float(h.x);
}
inline float __high2float(__half2 h) {
  return __half2float(h.y);
}

}  // namespace braid::simt::fp16

using braid::simt::fp16::__float2half;
using braid::simt::fp16::__float2half2_rn;
using braid::simt::fp16::__float2half_rn;
using braid::simt::fp16::__float2half_rz;
using braid::simt::fp16::__floats2half2_rn;
using braid::simt::fp16::__half;
using braid::simt::fp16::__half2;
using braid::simt::fp16::__half2float;
using braid::simt::fp16::__half_as_ushort;
using braid::simt::fp16::__halves2half2;
using braid::simt::fp16::__high2float;
using braid::simt::fp16::__high2half;
using braid::simt::fp16::__low2float;
using braid::simt::fp16::__low2half;
using braid::simt::fp16::__ushort_as_half;
