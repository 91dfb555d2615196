// oneDNN's in-place sgemm reads and the padded operand copy (src/ops/cpu/onednn_sgemm_strides.h):
// the rule, the copy, and products through it against float64 and, bitwise, against oneDNN
// reading the caller's operands itself.
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cpu/onednn_sgemm_strides.h"
#include "ops/cpu/sgemm_backend.h"
#include "support/gemm_check.h"

#if BRAID_CPU_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace braid::testing {
namespace {

using ops::cpu::onednn_reads_better_from_copy;
using ops::cpu::onednn_sgemm_reads_in_place;
using ops::cpu::set_spreading_stride;
using ops::cpu::SgemmOperand;
using ops::cpu::stride_spreads_cache_sets;

TEST(OnednnSgemmStrides, InPlaceReadsAreTheShortSidedProductsWithoutAvx512) {
  EXPECT_TRUE(onednn_sgemm_reads_in_place(256, 3072, false));   // 124M's MLP input gradient
  EXPECT_TRUE(onednn_sgemm_reads_in_place(1024, 256, false));   // width 256, 1024 tokens
  EXPECT_TRUE(onednn_sgemm_reads_in_place(50304, 256, false));  // either side may be short
  EXPECT_TRUE(onednn_sgemm_reads_in_place(520, 520, false));    // 1/m + 1/n = 0.00385
  EXPECT_FALSE(onednn_sgemm_reads_in_place(530, 530, false));   // 0.00377
  EXPECT_FALSE(onednn_sgemm_reads_in_place(768, 3072, false));
  EXPECT_FALSE(onednn_sgemm_reads_in_place(256, 3072, true));  // AVX-512: never copied
  EXPECT_FALSE(onednn_sgemm_reads_in_place(0, 3072, false));
}

TEST(OnednnSgemmStrides, OnlyOddLineStridesSpreadRowsOverTheSets) {
  EXPECT_TRUE(stride_spreads_cache_sets(16));    // one line
  EXPECT_TRUE(stride_spreads_cache_sets(784));   // 49 lines
  EXPECT_FALSE(stride_spreads_cache_sets(32));   // two lines
  EXPECT_FALSE(stride_spreads_cache_sets(256));  // width 256
  EXPECT_FALSE(stride_spreads_cache_sets(768));  // 48 lines
  EXPECT_FALSE(stride_spreads_cache_sets(3072));
  EXPECT_FALSE(stride_spreads_cache_sets(50304));  // the padded vocabulary: 3144 lines
  EXPECT_FALSE(stride_spreads_cache_sets(50257));  // rows not line-aligned
  EXPECT_EQ(set_spreading_stride(1), 16);
  EXPECT_EQ(set_spreading_stride(16), 16);
  EXPECT_EQ(set_spreading_stride(17), 48);  // two lines would be even: three
  EXPECT_EQ(set_spreading_stride(256), 272);
  EXPECT_EQ(set_spreading_stride(3072), 3088);
  for (int64_t cols = 1; cols <= 4096; ++cols) {
    const int64_t ld = set_spreading_stride(cols);
    ASSERT_GE(ld, cols);
    ASSERT_LT(ld, cols + 32) << cols;
    ASSERT_TRUE(stride_spreads_cache_sets(ld)) << cols;
  }
}

TEST(OnednnSgemmStrides, CopiesAreForInPlaceReadsOfLargeBlocksAtCrowdingStrides) {
  // 124M's MLP input gradient reads W (768 x 3072) along the reduction.
  EXPECT_TRUE(onednn_reads_better_from_copy(256, 3072, 768, 3072, 3072, false));
  EXPECT_FALSE(onednn_reads_better_from_copy(256, 3072, 768, 3072, 3072, true));   // AVX-512
  EXPECT_FALSE(onednn_reads_better_from_copy(768, 3072, 768, 3072, 3072, false));  // packed
  EXPECT_FALSE(onednn_reads_better_from_copy(256, 3072, 768, 3072, 3088, false));  // spreads
  // A block under 64 KB, twice a 32 KB L1, is read where it is: 16 x 1023 floats is 64 bytes short.
  EXPECT_FALSE(onednn_reads_better_from_copy(256, 1023, 16, 1023, 1024, false));
  EXPECT_TRUE(onednn_reads_better_from_copy(256, 1024, 16, 1024, 1024, false));
  // A stride below the width is an error for oneDNN to report, not a block to copy.
  EXPECT_FALSE(onednn_reads_better_from_copy(256, 3072, 768, 3072, 1024, false));
}

TEST(OnednnSgemmStrides, TheCopyHoldsTheBlockAtTheNewStride) {
  const Slice s = random_slice(37, 256, 7, 1024);  // a 37 x 256 block of a 1024-wide matrix
  const SgemmOperand kept(s.data.data(), s.rows, s.cols, s.ld, false);
  EXPECT_FALSE(kept.copied());
  EXPECT_EQ(kept.data(), s.data.data());
  EXPECT_EQ(kept.ld(), 1024);
  const SgemmOperand copy(s.data.data(), s.rows, s.cols, s.ld, true);
  ASSERT_TRUE(copy.copied());
  EXPECT_EQ(copy.ld(), 272);
  for (int64_t i = 0; i < s.rows; ++i)
    ASSERT_EQ(std::memcmp(copy.data() + i * copy.ld(), &s.data[i * s.ld], 256 * sizeof(float)), 0)
        << "row " << i;
}

struct StridedProduct {
  std::string name;
  GemmShape shape;
  int64_t lda, ldb;  // the stored A's and B's leading dimensions
  bool copied;       // whether an operand is copied (on a CPU without AVX-512)
};

// Short-sided products whose reduction-row operands have strides that crowd the cache sets, as
// a training step meets them, plus one whose strides already spread (nothing copied).
const StridedProduct kStridedProducts[] = {
    {"A B, B 1024 wide (the MLP's input gradient at width 256)",
     {40, 300, 530, false, false},
     530,
     1024,
     true},
    {"A^T B, both 256 wide (a weight gradient)", {256, 256, 530, true, false}, 256, 256, true},
    {"A^T B, A 768 wide, B a 256-column slice of 1024",
     {300, 256, 300, true, false},
     768,
     1024,
     true},
    {"A B^T, nothing read along the reduction", {40, 300, 530, false, true}, 1024, 1024, false},
    {"A B, B already 784 wide", {40, 300, 530, false, false}, 530, 784, false},
};

TEST(OnednnSgemmStrides, ProductsThroughTheCopyMatchFloat64WithBothBetas) {
  uint32_t seed = 40;
  for (const StridedProduct& p : kStridedProducts) {
    SCOPED_TRACE(p.name);
    const GemmShape& g = p.shape;
    const bool copies_a =
        g.trans_a && onednn_reads_better_from_copy(g.m, g.n, g.k, g.m, p.lda, false);
    const bool copies_b =
        !g.trans_b && onednn_reads_better_from_copy(g.m, g.n, g.k, g.n, p.ldb, false);
    ASSERT_EQ(copies_a || copies_b, p.copied);
    GemmOperands o = make_operands(g, seed += 10, p.lda, p.ldb);
    for (const float beta : {0.0f, 1.0f}) {
      SCOPED_TRACE(::testing::Message() << "beta " << beta);
      const Slice before = o.c;
      ops::cpu::row_major_sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 0.5f, o.a.data.data(), o.a.ld,
                                o.b.data.data(), o.b.ld, beta, o.c.data.data(), o.c.ld);
      expect_matches_float64(g, o, before, 0.5f, beta, nullptr);
    }
  }
}

#if BRAID_CPU_GEMM_ONEDNN
// The copy changes where oneDNN reads an operand, not which kernel it runs or the order of its
// sums: the result is oneDNN's own on the caller's operands, bit for bit, on one and two threads.
// (On an AVX-512 CPU nothing is copied, and the comparison holds trivially.)
TEST(OnednnSgemmStrides, TheCopyLeavesOnednnsResultBitwiseUnchanged) {
  const int saved_threads = omp_get_max_threads();
  uint32_t seed = 80;
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const StridedProduct& p : kStridedProducts) {
      SCOPED_TRACE(::testing::Message() << p.name << ", threads " << threads);
      const GemmShape& g = p.shape;
      GemmOperands ours = make_operands(g, seed += 10, p.lda, p.ldb);
      GemmOperands theirs = ours;
      ops::cpu::row_major_sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, ours.a.data.data(),
                                ours.a.ld, ours.b.data.data(), ours.b.ld, 1.0f, ours.c.data.data(),
                                ours.c.ld);
      ASSERT_EQ(dnnl_sgemm(g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.m, g.n, g.k, 1.0f,
                           theirs.a.data.data(), theirs.a.ld, theirs.b.data.data(), theirs.b.ld,
                           1.0f, theirs.c.data.data(), theirs.c.ld),
                dnnl_success);
      EXPECT_EQ(std::memcmp(ours.c.data.data(), theirs.c.data.data(), ours.c.data.size() * 4), 0);
    }
  }
  omp_set_num_threads(saved_threads);
}
#endif

}  // namespace
}  // namespace braid::testing
