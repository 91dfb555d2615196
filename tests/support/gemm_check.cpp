// Raw GEMM operands and the float64 check (gemm_check.h).
#include "support/gemm_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

namespace braid::testing {

Slice random_slice(int64_t rows, int64_t cols, uint32_t seed, int64_t ld) {
  if (ld > 0 && ld < cols)
    throw std::invalid_argument("random_slice: leading dimension " + std::to_string(ld) +
                                " is below the width " + std::to_string(cols));
  Slice s{rows, cols, ld > 0 ? ld : cols + 5, {}};
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  s.data.resize(static_cast<size_t>(rows * s.ld));
  for (float& v : s.data) v = dist(gen);
  return s;
}

GemmOperands make_operands(const GemmShape& p, uint32_t seed, int64_t lda, int64_t ldb) {
  return {random_slice(p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, seed, lda),
          random_slice(p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, seed + 1, ldb),
          random_slice(p.m, p.n, seed + 2)};
}

void expect_matches_float64(const GemmShape& p, const GemmOperands& o, const Slice& c_before,
                            float alpha, float beta, const std::vector<float>* bias) {
  const double unit = 4.0 * std::sqrt(static_cast<double>(p.k)) * std::ldexp(1.0, -24);
  int64_t failures = 0;
  for (int64_t i = 0; i < p.m && failures < 5; ++i)
    for (int64_t j = 0; j < p.n && failures < 5; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double x = p.trans_a ? o.a.at(q, i) : o.a.at(i, q);
        const double y = p.trans_b ? o.b.at(j, q) : o.b.at(q, j);
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      double expected = alpha * sum;
      if (beta != 0.0f) expected += beta * static_cast<double>(c_before.at(i, j));
      if (bias) expected += (*bias)[j];
      const double tolerance = unit * std::abs(alpha) * magnitude + 1e-6;
      if (!(std::abs(o.c.at(i, j) - expected) <= tolerance)) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << o.c.at(i, j) << ", float64 "
                      << expected << ", tolerance " << tolerance;
        ++failures;
      }
    }
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = p.n; j < o.c.ld; ++j)
      ASSERT_EQ(std::memcmp(&o.c.data[i * o.c.ld + j], &c_before.data[i * o.c.ld + j], 4), 0)
          << "GEMM wrote outside its output slice at (" << i << ", " << j << ")";
}

}  // namespace braid::testing
