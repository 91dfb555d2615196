// Raw row-major GEMM operands for the CPU GEMM tests, and their check against float64.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::testing {

// A row-major matrix inside a wider one (leading dimension ld >= cols), so that any write
// outside it shows.
struct Slice {
  int64_t rows, cols, ld;
  std::vector<float> data;
  float at(int64_t i, int64_t j) const { return data[i * ld + j]; }
};

// Uniform values in [-1, 1), rows x cols with leading dimension ld (cols + 5 when 0).
Slice random_slice(int64_t rows, int64_t cols, uint32_t seed, int64_t ld = 0);

// C = alpha op(A) op(B) + beta C with op(A) m x k and op(B) k x n.
struct GemmShape {
  int64_t m, n, k;
  bool trans_a, trans_b;
};

struct GemmOperands {
  Slice a, b;  // as stored: A is k x m when transposed, B is n x k when transposed
  Slice c;
};

// Random operands for `shape`; lda and ldb are the stored matrices' leading dimensions (each
// its width + 5 when 0).
GemmOperands make_operands(const GemmShape& shape, uint32_t seed, int64_t lda = 0, int64_t ldb = 0);

// Checks o.c against float64, given C as it was before the call. Each element's tolerance is
// a rounding estimate for its own sum: 4 sqrt(k) 2^-24 sum_p |a_ip b_pj|, well below what one
// missing or repeated term would shift. C's columns beyond n must be untouched.
void expect_matches_float64(const GemmShape& shape, const GemmOperands& o, const Slice& c_before,
                            float alpha, float beta, const std::vector<float>* bias);

}  // namespace braid::testing
