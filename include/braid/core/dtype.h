// Element types and the conversions between them (bf16/f16 <-> f32 round to nearest even).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace braid {

enum class DType : uint8_t { f32, bf16, f16, i32, i64, u8 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
DType dtype_from_name(std::string_view name);  // throws on an unknown name
bool is_floating(DType t);

// The conversions are one definition for the host and the device (CUDA kernels include this
// header), so a value converted on either is the same bits.
#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

namespace detail {

BRAID_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
#endif
}

BRAID_HOST_DEVICE inline float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

}  // namespace detail

// bf16 keeps the top 16 bits of an f32; rounding to nearest-even, NaN kept quiet.
BRAID_HOST_DEVICE inline uint16_t f32_to_bf16(float f) {
  const uint32_t bits = detail::float_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

BRAID_HOST_DEVICE inline float bf16_to_f32(uint16_t h) {
  return detail::bits_float(static_cast<uint32_t>(h) << 16);
}

// IEEE half: rounding to nearest-even, overflow to infinity, subnormals kept, NaN kept quiet.
BRAID_HOST_DEVICE inline uint16_t f32_to_f16(float f) {
  const uint32_t x = detail::float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): shift the implicit-1 mantissa into place, round to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // value = mant * 2^(exp-150); half units are 2^-24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
  uint32_t h = (abs - 0x38000000u) >> 13;
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

BRAID_HOST_DEVICE inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return detail::bits_float(sign);
    exp = 113;  // subnormal: normalise
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    return detail::bits_float(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
  }
  if (exp == 31) return detail::bits_float(sign | 0x7f800000u | (mant << 13));
  return detail::bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// Element i of an array of dtype t, as float (integers converted, 64-bit ones rounded).
BRAID_HOST_DEVICE inline float load_as_float(const void* base, int64_t i, DType t) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    case DType::i64:
      return static_cast<float>(static_cast<const int64_t*>(base)[i]);
    case DType::u8:
      return static_cast<float>(static_cast<const uint8_t*>(base)[i]);
  }
  return 0.0f;
}

// Writes v as element i of an array of dtype t. Float to integer truncates toward zero; values
// outside the integer's range are undefined in C++ (and differ between the host and a device).
BRAID_HOST_DEVICE inline void store_from_float(void* base, int64_t i, DType t, float v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(base)[i] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
      break;
    case DType::f16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(v);
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DType::i64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
  }
}

}  // namespace braid
