// CUDA affine map out = alpha * x + beta over dense tensors.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// x and out are dense f32 with equal element counts and may alias (in-place scale_). The
// multiply and the add round separately (-fmad=false); the CPU build may fuse them, so the two
// agree to 1 ulp, not bitwise.
void affine(const Tensor& x, float alpha, float beta, Tensor& out);

}  // namespace braid::cuda
