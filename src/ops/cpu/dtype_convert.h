// Element conversions of the CPU copy and fill kernels: any dtype read as f32, f32 written as any.
#pragma once

#include <cstdint>

#include "braid/core/dtype.h"

namespace braid::ops::cpu {

// Element i of a row of dtype t, as float.
inline float load_as_float(const void* base, int64_t i, DType t) {
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
  return 0;
}

// Writes v as element i of a row of dtype t.
inline void store_from_float(void* base, int64_t i, DType t, float v) {
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

}  // namespace braid::ops::cpu
