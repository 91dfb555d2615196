// oneDNN's matmul primitive for the products it runs faster than oneDNN's sgemm.
#pragma once

#include <cstdint>

namespace braid::ops::cpu {

// Whether C = op(A) op(B) (+ C) goes through onednn_matmul. Only the forward product of a
// linear layer, X W^T, with few rows (m <= 512) and a long reduction (k >= 512) does: there the
// primitive's blocked kernels keep up when the weight comes from memory rather than cache, and
// oneDNN 2.6's sgemm falls behind (cold-cache sweep on AVX-512). With
// many rows or a short reduction sgemm was as fast or faster, and for the gradient products
// (N N, T N) it always was. The choice depends on the shape only, so a run is reproducible.
bool matmul_primitive_suits(bool trans_a, bool trans_b, int64_t m, int64_t k, float alpha,
                            float beta);

// C = A B^T (beta 0) or C += A B^T (beta 1), row-major, through a matmul primitive created once
// per shape, leading dimensions, beta, bias or not and thread count. A bias (n values, beta 0
// only) is added to every row by the primitive as it writes C.
void onednn_matmul(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr);

}  // namespace braid::ops::cpu
