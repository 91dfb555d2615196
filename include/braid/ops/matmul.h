// Differentiable matrix products through the GEMM kernel (sgemm on CPU).
#pragma once

#include "braid/core/tensor.h"

namespace braid {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]; b may also be 2-D and is then shared by every
// batch. Transposed views are passed to GEMM without copies.
Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., in] @ weight[out, in]^T + bias[out] (bias may be undefined) -> [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace braid
