// CUDA GEMM through cuBLAS: c = alpha * op(a) @ op(b) + beta * c over row- or column-major views.
#pragma once

#include "braid/core/tensor.h"
#include "launch_config.h"

namespace braid::cuda {

// Same contract as the CPU kernel: each matrix may be row- or column-major (unit stride in
// either of its last two dims, leading dimension large enough); c has unit stride in its last
// dim; batch dims are c's leading dims, which a and b either share or lack (then they are
// reused for every batch). Batch dims that merge become one cublasSgemmStridedBatched call;
// others are looped over on the host. FP32 math (no TF32), so results match the CPU's sgemm to
// summation-order rounding.
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha, float beta,
          Tensor& c);

// The cuBLAS call gemm makes (host math, exposed for tests). cuBLAS is column-major, and a
// row-major m x n matrix is a column-major n x m one, so gemm computes c^T = op(b)^T op(a)^T:
// cuBLAS's first operand is b and its second is a.
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;  // c is m x n; op(a) is m x k; op(b) is k x n
  bool blas_trans_b = false;    // cuBLAS op on its first operand (our b)
  bool blas_trans_a = false;    // cuBLAS op on its second operand (our a)
  int64_t lda = 1, ldb = 1, ldc = 1;
  StridedLayout batch;  // merged batch dims; operands 0 = a, 1 = b, 2 = c (stride 0: shared)
};
GemmPlan plan_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c);

}  // namespace braid::cuda
