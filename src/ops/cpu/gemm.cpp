// CPU GEMM through OpenBLAS sgemm; strided (transposed) views go in without copies.
#include <cblas.h>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {
namespace {

// A matrix view as sgemm sees it: row-major data with a leading dimension, maybe transposed.
struct BlasMatrix {
  bool transposed;
  int64_t ld;
};

// rows x cols view with strides (s0, s1); `trans` asks for op(M) = M^T.
BlasMatrix as_blas(int64_t rows, int64_t cols, int64_t s0, int64_t s1, bool trans) {
  if (s1 == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : s0;
    if (ld >= std::max<int64_t>(cols, 1)) return {trans, ld};
  }
  if (s0 == 1 || rows == 1) {
    // Column-major storage of an rows x cols matrix is row-major storage of its transpose.
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : s1;
    if (ld >= std::max<int64_t>(rows, 1)) return {!trans, ld};
  }
  BRAID_FAIL("gemm operand {}x{} with strides ({}, {}) is neither row- nor column-major", rows,
             cols, s0, s1);
}

}  // namespace

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha, float beta,
          Tensor& c) {
  const int64_t m = c.size(-2), n = c.size(-1);
  const int64_t k = trans_a ? a.size(-2) : a.size(-1);
  BRAID_CHECK((trans_a ? a.size(-1) : a.size(-2)) == m &&
                  (trans_b ? b.size(-1) : b.size(-2)) == k &&
                  (trans_b ? b.size(-2) : b.size(-1)) == n,
              "gemm shapes do not chain: {}{} @ {}{} -> {}", a.str(), trans_a ? "^T" : "", b.str(),
              trans_b ? "^T" : "", c.str());
  BRAID_CHECK(c.stride(-1) == 1 || n == 1, "gemm output {} needs unit stride in its last dim",
              c.str());
  const BlasMatrix ma = as_blas(a.size(-2), a.size(-1), a.stride(-2), a.stride(-1), trans_a);
  const BlasMatrix mb = as_blas(b.size(-2), b.size(-1), b.stride(-2), b.stride(-1), trans_b);
  const int64_t ldc = m > 1 ? c.stride(-2) : std::max<int64_t>(n, 1);

  // Batch dims: c's leading dims; a and b either share them or are plain matrices.
  const int batch_dims = c.dim() - 2;
  int64_t batches = 1;
  for (int d = 0; d < batch_dims; ++d) batches *= c.shape()[d];
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  for (int64_t i = 0; i < batches; ++i) {
    int64_t oa = 0, ob = 0, oc = 0, rem = i;
    for (int d = batch_dims - 1; d >= 0; --d) {
      const int64_t idx = rem % c.shape()[d];
      rem /= c.shape()[d];
      oc += idx * c.strides()[d];
      if (a.dim() > 2) oa += idx * a.strides()[d];
      if (b.dim() > 2) ob += idx * b.strides()[d];
    }
    cblas_sgemm(CblasRowMajor, ma.transposed ? CblasTrans : CblasNoTrans,
                mb.transposed ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, pa + oa, static_cast<int>(ma.ld), pb + ob,
                static_cast<int>(mb.ld), beta, pc + oc, static_cast<int>(ldc));
  }
}

}  // namespace braid::ops::cpu
