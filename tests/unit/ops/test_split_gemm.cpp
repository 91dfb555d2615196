// Vocabulary-sized GEMMs cut into chunks for the threads (src/ops/cpu/split_gemm.h): the cut
// rule, every cut against float64 on slices of wider matrices, and bitwise the same result on
// any thread count.
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "braid/core/error.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/cpu/sgemm_backend.h"
#include "ops/cpu/split_gemm.h"
#include "support/gemm_check.h"

namespace braid::testing {
namespace {

using ops::cpu::GemmSplit;
using ops::cpu::plan_gemm_split;
using Axis = GemmSplit::Axis;

TEST(SplitGemm, CutsOnlyVocabularySizedProductsAlongTheirLongestDimension) {
  // GPT-2 124M's LM head at 256 tokens: the forward X E^T (m 256, n 50304, k 768), the input
  // gradient dL E (k 50304) and the embedding gradient dL^T X (m 50304).
  const GemmSplit forward = plan_gemm_split(256, 50304, 768);
  EXPECT_EQ(forward.axis, Axis::columns);
  EXPECT_EQ(forward.length, 50304);
  EXPECT_EQ(forward.chunk, 3200);
  EXPECT_EQ(forward.count(), 16);
  EXPECT_EQ(plan_gemm_split(256, 768, 50304).axis, Axis::reduction);
  EXPECT_EQ(plan_gemm_split(50304, 768, 256).axis, Axis::rows);
  // A transformer block's products stay whole, and so does anything below the threshold.
  EXPECT_EQ(plan_gemm_split(256, 3072, 768).axis, Axis::none);
  EXPECT_EQ(plan_gemm_split(16383, 4, 4).axis, Axis::none);
  EXPECT_EQ(plan_gemm_split(4, 16384, 4).axis, Axis::columns);
  // A reduction cut needs one m x n partial product per chunk; past the limit it stays whole.
  EXPECT_EQ(plan_gemm_split(512, 1024, 50304).axis, Axis::reduction);
  EXPECT_EQ(plan_gemm_split(1024, 1024, 50304).axis, Axis::none);
  for (const int64_t length : {int64_t{16384}, int64_t{16385}, int64_t{50257}, int64_t{1} << 20}) {
    SCOPED_TRACE(::testing::Message() << "length " << length);
    const GemmSplit split = plan_gemm_split(length, 8, 8);
    EXPECT_EQ(split.chunk % 64, 0);
    EXPECT_LE(split.count(), 16);
    EXPECT_GE(split.count() * split.chunk, length);
    EXPECT_LT((split.count() - 1) * split.chunk, length);  // no empty chunk
  }
}

struct Product : GemmShape {
  std::string name;
  Axis expected_axis;
};

// Every cut and every operand orientation it meets; each product is small in its other two
// dimensions so that the float64 reference stays quick.
const Product kProducts[] = {
    {{16500, 24, 40, true, false}, "rows, A^T B", Axis::rows},
    {{16500, 20, 36, false, true}, "rows, A B^T", Axis::rows},
    {{6, 16400, 48, false, true}, "columns, A B^T", Axis::columns},
    {{5, 16450, 30, false, false}, "columns, A B", Axis::columns},
    {{5, 7, 17000, false, false}, "reduction, A B", Axis::reduction},
    {{6, 4, 16600, true, true}, "reduction, A^T B^T", Axis::reduction},
};

using Operands = GemmOperands;

// C = alpha op(A) op(B) + beta C (+ bias) through row_major_sgemm or row_major_sgemm_bias.
void run(const Product& p, Operands& o, float alpha, float beta, const std::vector<float>* bias) {
  if (bias) {
    ops::cpu::row_major_sgemm_bias(p.trans_a, p.trans_b, p.m, p.n, p.k, o.a.data.data(), o.a.ld,
                                   o.b.data.data(), o.b.ld, bias->data(), o.c.data.data(), o.c.ld);
  } else {
    ops::cpu::row_major_sgemm(p.trans_a, p.trans_b, p.m, p.n, p.k, alpha, o.a.data.data(), o.a.ld,
                              o.b.data.data(), o.b.ld, beta, o.c.data.data(), o.c.ld);
  }
}

TEST(SplitGemm, EveryCutMatchesFloat64WithBothBetasAndABias) {
  uint32_t seed = 100;
  for (const Product& p : kProducts) {
    SCOPED_TRACE(p.name);
    ASSERT_EQ(plan_gemm_split(p.m, p.n, p.k).axis, p.expected_axis);
    Operands o = make_operands(p, seed += 10);
    std::vector<float> bias(static_cast<size_t>(p.n));
    for (int64_t j = 0; j < p.n; ++j) bias[j] = 0.01f * static_cast<float>(j % 97) - 0.5f;
    {
      SCOPED_TRACE("beta 0 over NaN, alpha 0.75");
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j)
          o.c.data[i * o.c.ld + j] = std::numeric_limits<float>::quiet_NaN();
      const Slice before = o.c;
      run(p, o, 0.75f, 0.0f, nullptr);
      expect_matches_float64(p, o, before, 0.75f, 0.0f, nullptr);
    }
    {
      SCOPED_TRACE("beta 1, alpha -1.5");
      const Slice before = o.c;
      run(p, o, -1.5f, 1.0f, nullptr);
      expect_matches_float64(p, o, before, -1.5f, 1.0f, nullptr);
    }
    {
      SCOPED_TRACE("bias");
      const Slice before = o.c;
      run(p, o, 1.0f, 0.0f, &bias);
      expect_matches_float64(p, o, before, 1.0f, 0.0f, &bias);
    }
  }
}

// The chunks are handed out in whatever order the threads free up, yet every thread count
// gives the same bits: the cut depends on the shape alone and partial products are added in
// chunk order.
TEST(SplitGemm, BitwiseTheSameOnOneTwoAndThreeThreads) {
  const int saved_threads = omp_get_max_threads();
  uint32_t seed = 300;
  for (const Product& p : kProducts) {
    SCOPED_TRACE(p.name);
    const Operands start = make_operands(p, seed += 10);
    std::vector<std::vector<float>> results;
    for (const int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      for (int repeat = 0; repeat < 2; ++repeat) {
        Operands o = start;
        run(p, o, 1.0f, 1.0f, nullptr);
        results.push_back(o.c.data);
      }
    }
    for (size_t r = 1; r < results.size(); ++r)
      EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), results[0].size() * 4), 0)
          << "run " << r << " (threads " << 1 + r / 2 << ") differs from the 1-thread run";
  }
  omp_set_num_threads(saved_threads);
}

// A chunk that fails (the library rejecting its arguments, say) must surface as the caller's
// error, not terminate the process from inside the OpenMP region; the other chunks stop.
std::atomic<int> g_chunks_run{0};
void gemm_failing_on_third_chunk(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                 int64_t, const float*, int64_t, float, float*, int64_t,
                                 const float*) {
  if (g_chunks_run.fetch_add(1) == 2) throw Error("chunk three failed");
  // Each chunk takes a while, as a real one does, so that the others cannot all be handed out
  // while the exception is being thrown.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

TEST(SplitGemm, AnErrorInOneChunkReachesTheCaller) {
  const GemmSplit split = plan_gemm_split(4, 50304, 8);
  ASSERT_EQ(split.count(), 16);
  g_chunks_run = 0;
  std::vector<float> a(4 * 8), b(8 * 50304), c(4 * 50304);
  try {
    ops::cpu::run_split_gemm(split, gemm_failing_on_third_chunk, false, false, 4, 50304, 8, 1.0f,
                             a.data(), 8, b.data(), 50304, 0.0f, c.data(), 50304, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chunk three failed");
  }
  EXPECT_LT(g_chunks_run.load(), 16) << "the hand-out went on after the failure";
}

// A caller's own parallel region may call a product that oneDNN's matmul primitive takes (the
// split never hands it one, but a user's training loop may). Each thread then runs it alone and
// must still compute all of it, also with a primitive that was created outside the region.
TEST(SplitGemm, MatmulPrimitiveInsideACallersParallelRegion) {
  const Product p{{64, 96, 512, false, true}, "primitive", Axis::none};
  ASSERT_TRUE(ops::cpu::matmul_primitive_suits(p.trans_a, p.trans_b, p.m, p.k, 1.0f, 0.0f));
  std::vector<Operands> per_thread = {make_operands(p, 500), make_operands(p, 510)};
  const std::vector<Slice> before = {per_thread[0].c, per_thread[1].c};
  // The same product outside a region first, so that a primitive planned for all threads exists.
  Operands outside = make_operands(p, 520);
  const Slice outside_before = outside.c;
  run(p, outside, 1.0f, 0.0f, nullptr);
  expect_matches_float64(p, outside, outside_before, 1.0f, 0.0f, nullptr);
#pragma omp parallel num_threads(2)
  {
    for (int t = omp_get_thread_num(); t < 2; t += omp_get_num_threads())
      run(p, per_thread[t], 1.0f, 0.0f, nullptr);
  }
  for (int t = 0; t < 2; ++t) {
    SCOPED_TRACE(::testing::Message() << "thread " << t);
    expect_matches_float64(p, per_thread[t], before[t], 1.0f, 0.0f, nullptr);
  }
}

}  // namespace
}  // namespace braid::testing
