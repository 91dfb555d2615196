// Launch-configuration math (host only): grid sizes, reduction chunks, strided-layout merging.
#include "launch_config.h"

#include <algorithm>
#include <vector>

namespace braid::cuda {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

unsigned grid_1d(int64_t n, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(n, threads), 1, kMaxGridBlocks));
}

int row_block_threads(int64_t row_length, int max_threads) {
  const int64_t warps = ceil_div(std::max<int64_t>(row_length, 1), kWarpSize);
  return static_cast<int>(std::min<int64_t>(warps * kWarpSize, max_threads));
}

int sum_blocks(int64_t n) {
  // Eight values per thread before the block reduction keeps the partials few.
  return static_cast<int>(std::clamp<int64_t>(ceil_div(n, kThreadsPerBlock * 8), 1, kSumMaxBlocks));
}

ChunkPlan plan_chunks(int64_t rows, int64_t cols) {
  if (rows <= 0) return {1, 0};
  int64_t chunks = std::min(ceil_div(rows, kRowsPerChunk), kMaxChunks);
  chunks = std::min(chunks, std::max<int64_t>(1, kMaxPartials / std::max<int64_t>(cols, 1)));
  ChunkPlan plan;
  plan.rows_per_chunk = ceil_div(rows, chunks);
  plan.chunks = ceil_div(rows, plan.rows_per_chunk);  // never an empty last chunk
  return plan;
}

int64_t StridedLayout::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= sizes[d];
  return n;
}

bool StridedLayout::dense() const {
  if (rank == 0) return true;
  if (rank > 1) return false;
  for (int o = 0; o < num_operands; ++o)
    if (strides[o][0] != 1) return false;
  return true;
}

StridedLayout collapse_layout(const Shape& shape, const Shape* const* strides, int num_operands) {
  BRAID_CHECK(num_operands >= 1 && num_operands <= kMaxOperands,
              "collapse_layout takes 1 to {} operands, got {}", kMaxOperands, num_operands);
  for (int o = 0; o < num_operands; ++o)
    BRAID_CHECK(strides[o]->size() == shape.size(),
                "collapse_layout: operand {} has strides {} for shape {}", o,
                shape_str(*strides[o]), shape_str(shape));
  StridedLayout layout;
  layout.num_operands = num_operands;
  if (shape_numel(shape) == 0) {
    layout.rank = 1;  // numel() == 0: callers return before launching anything
    return layout;
  }
  // Built innermost first; each new dim either extends the innermost-so-far run or starts one.
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, kMaxOperands>> steps;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;  // contributes no offset whatever its stride
    std::array<int64_t, kMaxOperands> s{};
    for (int o = 0; o < num_operands; ++o) s[o] = (*strides[o])[d];
    bool merges = !sizes.empty();
    for (int o = 0; o < num_operands && merges; ++o)
      merges = s[o] == steps.back()[o] * sizes.back();
    if (merges) {
      sizes.back() *= shape[d];  // the merged dim keeps the inner stride
    } else {
      sizes.push_back(shape[d]);
      steps.push_back(s);
    }
  }
  BRAID_CHECK(static_cast<int>(sizes.size()) <= kMaxDims,
              "shape {} needs {} strided dims after merging; CUDA kernels handle at most {} "
              "(make the operands contiguous first)",
              shape_str(shape), sizes.size(), kMaxDims);
  layout.rank = static_cast<int>(sizes.size());
  for (int i = 0; i < layout.rank; ++i) {
    const int d = layout.rank - 1 - i;  // back to outermost-first
    layout.sizes[d] = sizes[i];
    for (int o = 0; o < num_operands; ++o) layout.strides[o][d] = steps[i][o];
  }
  return layout;
}

SumToPlan plan_sum_to(const Tensor& x, const Tensor& out) {
  const Shape& xs = x.shape();
  const Shape& os = out.shape();
  const int lead = x.dim() - out.dim();
  BRAID_CHECK(lead >= 0, "sum_to: out {} has more dims than x {}", out.str(), x.str());
  Shape kept_shape, kept_x, kept_out, reduced_shape, reduced_x;
  int last_reduced = -1, first_kept = x.dim();
  for (int d = 0; d < x.dim(); ++d) {
    const int od = d - lead;
    if (od >= 0 && os[od] == xs[d]) {
      kept_shape.push_back(xs[d]);
      kept_x.push_back(x.strides()[d]);
      kept_out.push_back(out.strides()[od]);
      if (xs[d] > 1) first_kept = std::min(first_kept, d);
    } else {
      BRAID_CHECK(od < 0 || os[od] == 1, "sum_to: out {} does not broadcast to x {}", out.str(),
                  x.str());
      reduced_shape.push_back(xs[d]);
      reduced_x.push_back(x.strides()[d]);
      if (xs[d] > 1) last_reduced = d;
    }
  }
  SumToPlan plan;
  const Shape* kept_strides[] = {&kept_x, &kept_out};
  plan.kept = collapse_layout(kept_shape, kept_strides, 2);
  const Shape* reduced_strides[] = {&reduced_x};
  plan.reduced = collapse_layout(reduced_shape, reduced_strides, 1);
  plan.trailing_block = x.is_contiguous() && out.is_contiguous() && last_reduced < first_kept;
  return plan;
}

}  // namespace braid::cuda
