// One large GEMM cut into chunks that the threads take one at a time as they finish, instead of
// the two fixed halves the BLAS library splits it into.
//
// On a shared machine the cores' speeds differ from moment to moment (one thread's half of a
// GEMM often takes longer than the other's), and with fixed halves the faster thread waits at the
// end. Handed out in ~16 chunks, the faster thread simply takes more of them. Only products with
// one dimension as long as a vocabulary are cut: there a chunk is still a large, efficient GEMM.
#pragma once

#include <cstdint>
#include <functional>

namespace braid::ops::cpu {

// Where a product C = alpha op(A) op(B) + beta C (op(A) m x k, op(B) k x n) is cut.
struct GemmSplit {
  enum class Axis { none, rows, columns, reduction };
  Axis axis = Axis::none;
  int64_t length = 0;  // the cut dimension: m, n or k
  int64_t chunk = 0;   // its length per chunk; the last chunk may be shorter

  int64_t count() const { return axis == Axis::none ? 0 : (length + chunk - 1) / chunk; }
};

// The dimension that must reach this length before a product is cut (GPT-2's vocabulary is 50257).
inline constexpr int64_t kMinSplitLength = 16384;
// A reduction cut writes one m x n partial product per chunk; above this many elements of C it
// would cost more memory traffic than the balance gains, and the product stays whole.
inline constexpr int64_t kMaxReductionSplitOutput = int64_t{1} << 19;

// The cut for an m x n x k product: none unless the longest dimension reaches kMinSplitLength;
// otherwise along it, in ~16 chunks whose length is a multiple of 64. It depends on the shape
// alone, never on the thread count, so a cut product comes out bitwise the same on any number of
// threads.
GemmSplit plan_gemm_split(int64_t m, int64_t n, int64_t k);

// Calls chunk(i) for every i in [0, count) on the caller's OpenMP threads, each taking the next
// i when it finishes one. The first exception from a chunk stops the hand-out and is rethrown.
void for_each_chunk_as_threads_free_up(int64_t count, const std::function<void(int64_t)>& chunk);

// One chunk's product: row_major_sgemm's arguments, plus a bias (n values added to every row of
// C; null for none, and only with beta = 0). It runs on the calling thread alone, since libgomp
// gives a parallel region opened inside another one a single thread.
using ChunkGemm = void (*)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                           float* c, int64_t ldc, const float* bias);

// Runs the product chunk by chunk on the caller's OpenMP threads, each taking the next chunk
// when it finishes one; an exception from a chunk reaches the caller. Which thread takes which
// chunk does not change the result: row and column chunks write disjoint parts of C, and reduction
// chunks write partial products of their own, which are then added in chunk order.
void run_split_gemm(const GemmSplit& split, ChunkGemm gemm, bool trans_a, bool trans_b, int64_t m,
                    int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, const float* bias);

}  // namespace braid::ops::cpu
