// The BLAS library behind braid's CPU GEMM: oneDNN's sgemm, or OpenBLAS's (BRAID_CPU_GEMM).
#pragma once

#include <cstdint>

namespace braid::ops::cpu {

// C = alpha op(A) op(B) + beta C, all row-major: op(A) is m x k, op(B) k x n, C m x n, each with
// its leading dimension. Runs on the caller's OpenMP thread count; with beta = 0, C's old
// values (even NaN) do not matter.
void row_major_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc);

// C = op(A) op(B) + bias, the n bias values added to each of C's m rows. Where oneDNN's matmul
// primitive takes the product (onednn_matmul.h) it adds the bias as it writes C; elsewhere C is
// filled with the bias rows and the GEMM accumulates into it.
void row_major_sgemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                          const float* a, int64_t lda, const float* b, int64_t ldb,
                          const float* bias, float* c, int64_t ldc);

// The library that row_major_sgemm calls, for logs and benchmark tables ("oneDNN 2.6.3").
const char* sgemm_library();

}  // namespace braid::ops::cpu
