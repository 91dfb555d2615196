// Launch-configuration math shared by the CUDA kernels: grid sizes, reduction chunking and the
// merging of strided layouts. Pure host code with no CUDA types, so it is tested on any machine.
//
// Everything here depends only on tensor shapes, never on the device (SM count, clocks), so a
// reduction splits the same way on every GPU and its float result is reproducible.
#pragma once

#include <array>
#include <cstdint>

#include "braid/core/tensor.h"

namespace braid::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr int kThreadsPerBlock = 256;
// Grid-stride loops never launch more blocks than this; the loop covers the rest. 8192 blocks
// of 256 threads is several waves on any current GPU, so the cap costs nothing.
inline constexpr int64_t kMaxGridBlocks = 8192;
// Strided kernels index up to this many dims after merging (collapse_layout).
inline constexpr int kMaxDims = 6;
inline constexpr int kMaxOperands = 3;

int64_t ceil_div(int64_t a, int64_t b);

// Blocks for a grid-stride loop over n items (at least 1, at most kMaxGridBlocks).
unsigned grid_1d(int64_t n, int threads = kThreadsPerBlock);

// Threads for a one-block-per-row kernel over rows of `row_length`: whole warps, at least one,
// at most `max_threads` (a multiple of 32), no more than the row needs.
int row_block_threads(int64_t row_length, int max_threads = 512);

// First-stage blocks of the two-stage sum over n values (at most kSumMaxBlocks).
inline constexpr int kSumMaxBlocks = 1024;
int sum_blocks(int64_t n);

// How a column reduction of a [rows, cols] iteration space is split: `chunks` groups of
// consecutive rows, each producing one partial per column, summed in chunk order afterwards.
// rows_per_chunk * chunks >= rows; partial storage (chunks * cols) stays under kMaxPartials.
inline constexpr int64_t kRowsPerChunk = 256;
inline constexpr int64_t kMaxChunks = 256;
inline constexpr int64_t kMaxPartials = int64_t{1} << 24;
struct ChunkPlan {
  int64_t chunks = 1;
  int64_t rows_per_chunk = 0;
};
ChunkPlan plan_chunks(int64_t rows, int64_t cols);

// A strided iteration space shared by up to kMaxOperands operands: sizes[d] and, per operand,
// strides[o][d] (in elements), outermost dim first. rank 0 means a single element.
struct StridedLayout {
  int rank = 0;
  int num_operands = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxOperands][kMaxDims] = {};

  int64_t numel() const;
  // True when every operand walks memory densely in iteration order (rank <= 1, unit strides).
  bool dense() const;
};

// Drops size-1 dims and merges neighbouring dims that every operand steps through as one
// (stride[d] == stride[d + 1] * size[d + 1] for all operands), so [B, T, C] + [C] becomes a
// 2-d [B*T, C] walk. Throws when more than kMaxDims dims remain. An empty shape (numel 0) is
// the caller's to skip; it is returned with its zero-size dim kept.
StridedLayout collapse_layout(const Shape& shape, const Shape* const* strides, int num_operands);

// sum_to's plan: the dims of x that survive into out ("kept") and those summed away
// ("reduced"), each merged like collapse_layout does. operand 0 is x, operand 1 is out (kept
// dims only; reduced dims have no out stride).
struct SumToPlan {
  StridedLayout kept;     // operands: x, out
  StridedLayout reduced;  // operand: x
  // x and out are dense and out is x's trailing block: x is [rows, cols] with out[cols].
  bool trailing_block = false;
};
SumToPlan plan_sum_to(const Tensor& x, const Tensor& out);

}  // namespace braid::cuda
