// Cutting a vocabulary-sized GEMM into chunks that the OpenMP threads take as they finish.
#include "ops/cpu/split_gemm.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

#include "ops/cpu/host_scratch.h"

namespace braid::ops::cpu {
namespace {

constexpr int64_t kTargetChunks = 16;
constexpr int64_t kChunkMultiple = 64;

}  // namespace

// An exception must not leave an OpenMP region (it would terminate the process), so the first
// one stops the hand-out and is rethrown to the caller once the threads have joined.
void for_each_chunk_as_threads_free_up(int64_t count, const std::function<void(int64_t)>& chunk) {
  std::atomic<int64_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
#pragma omp parallel
  for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
    try {
      chunk(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(count);
    }
  }
  if (failure) std::rethrow_exception(failure);
}

GemmSplit plan_gemm_split(int64_t m, int64_t n, int64_t k) {
  const int64_t longest = std::max({m, n, k});
  if (longest < kMinSplitLength) return {};
  GemmSplit split;
  if (m == longest) {
    split.axis = GemmSplit::Axis::rows;
  } else if (n == longest) {
    split.axis = GemmSplit::Axis::columns;
  } else {
    if (m * n > kMaxReductionSplitOutput) return {};
    split.axis = GemmSplit::Axis::reduction;
  }
  split.length = longest;
  const int64_t per_chunk = (longest + kTargetChunks - 1) / kTargetChunks;
  split.chunk = (per_chunk + kChunkMultiple - 1) / kChunkMultiple * kChunkMultiple;
  return split;
}

void run_split_gemm(const GemmSplit& split, ChunkGemm gemm, bool trans_a, bool trans_b, int64_t m,
                    int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  const int64_t count = split.count();
  auto span_of = [&](int64_t i) {
    const int64_t begin = i * split.chunk;
    return std::pair{begin, std::min(split.chunk, split.length - begin)};
  };
  switch (split.axis) {
    case GemmSplit::Axis::none:
      gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
      return;
    case GemmSplit::Axis::rows:  // rows of op(A) and of C
      for_each_chunk_as_threads_free_up(count, [&](int64_t i) {
        const auto [row, rows] = span_of(i);
        gemm(trans_a, trans_b, rows, n, k, alpha, trans_a ? a + row : a + row * lda, lda, b, ldb,
             beta, c + row * ldc, ldc, bias);
      });
      return;
    case GemmSplit::Axis::columns:  // columns of op(B), of C and of the bias
      for_each_chunk_as_threads_free_up(count, [&](int64_t i) {
        const auto [col, cols] = span_of(i);
        gemm(trans_a, trans_b, m, cols, k, alpha, a, lda, trans_b ? b + col * ldb : b + col, ldb,
             beta, c + col, ldc, bias ? bias + col : nullptr);
      });
      return;
    case GemmSplit::Axis::reduction: {
      // Each chunk's product goes to its own dense m x n partial; the partials are then added
      // in chunk order, so the sum's rounding is the same whichever thread made which partial.
      const int64_t block = m * n;
      HostScratch partials(static_cast<size_t>(count * block));
      for_each_chunk_as_threads_free_up(count, [&](int64_t i) {
        const auto [at, depth] = span_of(i);
        gemm(trans_a, trans_b, m, n, depth, 1.0f, trans_a ? a + at * lda : a + at, lda,
             trans_b ? b + at : b + at * ldb, ldb, 0.0f, partials.data + i * block, n, nullptr);
      });
#pragma omp parallel for
      for (int64_t row = 0; row < m; ++row) {
        float* sum = partials.data + row * n;  // chunk 0's row, the others added into it
        for (int64_t i = 1; i < count; ++i) {
          const float* add = partials.data + i * block + row * n;
          for (int64_t col = 0; col < n; ++col) sum[col] += add[col];
        }
        float* out = c + row * ldc;
        for (int64_t col = 0; col < n; ++col) {
          float value = alpha * sum[col];
          if (beta != 0.0f) value += beta * out[col];  // beta 0 never reads C, which may be NaN
          if (bias) value += bias[col];
          out[col] = value;
        }
      }
      return;
    }
  }
}

}  // namespace braid::ops::cpu
