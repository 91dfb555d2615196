// CUDA copy of one strided tensor into another on the same device, converting dtypes.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// dst = src (equal shapes, one cuda device), the CopyKernel of kernel_signatures.h: any strides
// (src may broadcast through zero strides; dst must not), any two dtypes, converting exactly as
// the CPU kernel does (one dtype: the bits; i32 <-> i64: exact; otherwise through f32 with the
// same bit-level bf16/f16 rounding), so the two agree bit for bit. Dense copies of one dtype
// are a device-to-device memcpy, staged when the two ranges overlap (memmove semantics).
void copy(const Tensor& src, Tensor& dst);

}  // namespace braid::cuda
