// ShardSpec: where a local parameter shard sits inside the single-process parameter.
//
// Layout independence rests on this: initialisation fills a shard from global indices,
// checkpoints record which slice each rank holds, and resharding reads slices back. A
// shard is one box of the global tensor viewed in a regrouped shape (`block_shape`), which
// also covers fused layouts: the [q | k | v] rows of a qkv weight split by heads are the box
// [3, C/tp, C] at [0, r*C/tp, 0] of the weight viewed as [3, C, C].
#pragma once

#include <string>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::nn {

struct ShardSpec {
  Shape global_shape;  // the single-process parameter's shape
  Shape local_shape;   // the shard's own shape
  Shape block_shape;   // global_shape regrouped row-major (same element count)
  Shape offsets;       // the box's first index, per block_shape dim
  Shape sizes;         // the box's extent; the local tensor holds it row-major

  // The whole tensor (a replicated or unsharded parameter).
  static ShardSpec whole(const Shape& shape);
  // The box of `sizes` at `offsets` (both per dim of `global`).
  static ShardSpec box(const Shape& global, const Shape& offsets, const Shape& sizes);
  // Dim `dim` of `global` cut into `parts` equal pieces; piece `index`.
  static ShardSpec split(const Shape& global, int dim, int parts, int index);
  // Dim `dim` of `global` holds `groups` equal groups (the [q | k | v] of a fused weight);
  // each group is cut into `parts` pieces and the shard is piece `index` of every group.
  static ShardSpec split_groups(const Shape& global, int dim, int groups, int parts, int index);

  // The local elements [begin, begin + length) in row-major order, as boxes of the same
  // block view (at most 2 * dims - 1 of them, in order): a flat range of a shard, such as a
  // ZeRO-1 chunk, stored like any other slice.
  std::vector<ShardSpec> pieces(int64_t begin, int64_t length) const;

  bool is_whole() const { return offsets == Shape(offsets.size(), 0) && sizes == block_shape; }
  int64_t local_numel() const;
  // Global flat index of local flat element i.
  int64_t global_index(int64_t i) const;
  // This shard's values cut out of the whole parameter (a dense copy, local_shape).
  Tensor slice(const Tensor& global) const;
  // The reverse: writes `local` (local_numel values) into its box of `global` (dense).
  void place(const Tensor& local, Tensor& global) const;
  std::string str() const;  // "[3, 8/16 @8, 32]" style: extent/total @offset where sliced
};

}  // namespace braid::nn
