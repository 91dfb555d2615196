// Element types and the bf16/f16 <-> f32 conversions (round to nearest, ties to even).
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

// bf16 keeps the top 16 bits of an f32; rounding to nearest-even, NaN kept quiet.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace braid
