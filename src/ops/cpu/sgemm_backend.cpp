// row_major_sgemm through the library chosen at configure time.
//
// oneDNN is the default: at the 256-1024 rows of a CPU training micro-batch its JIT sgemm runs
// the forward (X W^T) and input-gradient (dY W) products faster than OpenBLAS 0.3.21 on
// AVX-512 (braid_micro_bench's BM_MatmulOp against BM_OpenBlasSgemm*); both are built on libgomp,
// so either shares braid's OpenMP thread pool.
#include "ops/cpu/sgemm_backend.h"

#include <cstring>
#include <limits>
#include <string>

#include "braid/core/error.h"
#include "ops/cpu/split_gemm.h"

#if BRAID_CPU_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.h>

#include "ops/cpu/onednn_matmul.h"
#include "ops/cpu/onednn_sgemm_strides.h"
#else
#include <cblas.h>
#endif

namespace braid::ops::cpu {
namespace {

#if BRAID_CPU_GEMM_ONEDNN

void library_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  if (matmul_primitive_suits(trans_a, trans_b, m, k, alpha, beta)) {
    onednn_matmul(m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Where oneDNN will read the operands in place, those whose rows run along the reduction (B
  // untransposed, A transposed) may be read from a copy whose stride spreads the rows over the
  // cache sets (onednn_sgemm_strides.h).
  const bool avx512 = onednn_has_avx512();
  const SgemmOperand a_read(a, k, m, lda,
                            trans_a && onednn_reads_better_from_copy(m, n, k, m, lda, avx512));
  const SgemmOperand b_read(b, k, n, ldb,
                            !trans_b && onednn_reads_better_from_copy(m, n, k, n, ldb, avx512));
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a_read.data(),
                 a_read.ld(), b_read.data(), b_read.ld(), beta, c, ldc);
  BRAID_CHECK(status == dnnl_success,
              "oneDNN sgemm failed (status {}) for op(A) {}x{} (lda {}{}), op(B) {}x{} (ldb {}{}), "
              "C ldc {}",
              static_cast<int>(status), m, k, lda, trans_a ? ", transposed" : "", k, n, ldb,
              trans_b ? ", transposed" : "", ldc);
}

std::string library_name() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

#else

void library_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  BRAID_CHECK(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
              "OpenBLAS sgemm takes 32-bit sizes; {}x{}x{} (ld {}, {}, {}) is too large", m, n, k,
              lda, ldb, ldc);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

std::string library_name() {
  return "OpenBLAS";
}

#endif

// One chunk of a split product, or a whole product, on the library. A bias (beta 0 only) is
// added by the matmul primitive where it takes the product, and is otherwise filled into C's rows
// for the GEMM to accumulate onto.
void library_sgemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                        float* c, int64_t ldc, const float* bias) {
  if (!bias) {
    library_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  BRAID_CHECK(beta == 0.0f, "a GEMM adds a bias only with beta = 0, not {}", beta);
#if BRAID_CPU_GEMM_ONEDNN
  if (matmul_primitive_suits(trans_a, trans_b, m, k, alpha, beta)) {
    onednn_matmul(m, n, k, a, lda, b, ldb, 0.0f, c, ldc, bias);
    return;
  }
#endif
#pragma omp parallel for if (m * n > (1 << 16))
  for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, bias, n * sizeof(float));
  library_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 1.0f, c, ldc);
}

// The product, cut into chunks for the threads where it is vocabulary-sized (split_gemm.h).
// Products the matmul primitive takes stay whole: it spreads its own work over the threads, and
// cut into single-threaded chunks it was no faster.
void split_or_whole_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc, const float* bias) {
#if BRAID_CPU_GEMM_ONEDNN
  const bool whole = matmul_primitive_suits(trans_a, trans_b, m, k, alpha, beta);
#else
  const bool whole = false;
#endif
  run_split_gemm(whole ? GemmSplit{} : plan_gemm_split(m, n, k), library_sgemm_bias, trans_a,
                 trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

}  // namespace

void row_major_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty reduction leaves beta C. Handled here because the libraries disagree about it
    // (oneDNN rejects the empty operand's null pointer); beta = 0 writes zeros without reading.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  split_or_whole_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
}

void row_major_sgemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                          const float* a, int64_t lda, const float* b, int64_t ldb,
                          const float* bias, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, bias, n * sizeof(float));
    return;
  }
  split_or_whole_sgemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc, bias);
}

const char* sgemm_library() {
  static const std::string name = library_name();
  return name.c_str();
}

}  // namespace braid::ops::cpu
