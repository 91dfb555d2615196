// ShardSpec construction and the local -> global index map.
#include "braid/nn/shard_spec.h"

#include <fmt/format.h>

namespace braid::nn {

ShardSpec ShardSpec::whole(const Shape& shape) {
  return {shape, shape, shape, Shape(shape.size(), 0), shape};
}

ShardSpec ShardSpec::box(const Shape& global, const Shape& offsets, const Shape& sizes) {
  BRAID_CHECK(offsets.size() == global.size() && sizes.size() == global.size(),
              "a box of {} at {} does not fit a tensor of shape {}", shape_str(sizes),
              shape_str(offsets), shape_str(global));
  for (size_t d = 0; d < global.size(); ++d)
    BRAID_CHECK(offsets[d] >= 0 && sizes[d] >= 0 && offsets[d] + sizes[d] <= global[d],
                "a box of {} at {} leaves the global shape {} in dim {}", shape_str(sizes),
                shape_str(offsets), shape_str(global), d);
  return {global, sizes, global, offsets, sizes};
}

ShardSpec ShardSpec::split(const Shape& global, int dim, int parts, int index) {
  return split_groups(global, dim, 1, parts, index);
}

ShardSpec ShardSpec::split_groups(const Shape& global, int dim, int groups, int parts, int index) {
  BRAID_CHECK(dim >= 0 && dim < static_cast<int>(global.size()),
              "shard dim {} is outside a tensor of shape {}", dim, shape_str(global));
  BRAID_CHECK(groups >= 1 && parts >= 1 && index >= 0 && index < parts,
              "shard {} of {} parts over {} groups is not a valid piece", index, parts, groups);
  const int64_t group_rows = global[dim] / groups;
  BRAID_CHECK(global[dim] % groups == 0 && group_rows % parts == 0,
              "dim {} of {} ({} entries in {} groups) does not split into {} equal parts", dim,
              shape_str(global), global[dim], groups, parts);
  const int64_t piece = group_rows / parts;
  ShardSpec s;
  s.global_shape = global;
  s.local_shape = global;
  s.local_shape[dim] = piece * groups;
  // Block view: [..., groups, group_rows, ...] with the box [..., groups, piece, ...]; a plain
  // split (one group) keeps the global shape.
  for (int d = 0; d < static_cast<int>(global.size()); ++d) {
    if (d == dim && groups > 1) {
      s.block_shape.push_back(groups);
      s.offsets.push_back(0);
      s.sizes.push_back(groups);
      s.block_shape.push_back(group_rows);
      s.offsets.push_back(piece * index);
      s.sizes.push_back(piece);
    } else {
      s.block_shape.push_back(global[d]);
      s.offsets.push_back(d == dim ? piece * index : 0);
      s.sizes.push_back(d == dim ? piece : global[d]);
    }
  }
  return s;
}

int64_t ShardSpec::local_numel() const {
  int64_t n = 1;
  for (int64_t v : sizes) n *= v;
  return n;
}

int64_t ShardSpec::global_index(int64_t i) const {
  int64_t rem = i, index = 0, stride = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    const int64_t local = rem % sizes[d];
    rem /= sizes[d];
    index += (local + offsets[d]) * stride;
    stride *= block_shape[d];
  }
  return index;
}

Tensor ShardSpec::slice(const Tensor& global) const {
  BRAID_CHECK(global.shape() == global_shape, "shard {} cannot be cut from {}", str(),
              global.str());
  Tensor box = global.contiguous().reshape(block_shape);
  for (int d = 0; d < static_cast<int>(block_shape.size()); ++d)
    box = box.narrow(d, offsets[d], sizes[d]);
  return box.contiguous().reshape(local_shape);
}

void ShardSpec::place(const Tensor& local, Tensor& global) const {
  BRAID_CHECK(global.shape() == global_shape && global.is_contiguous(),
              "shard {} cannot be placed into {}", str(), global.str());
  BRAID_CHECK(local.numel() == local_numel(), "shard {} holds {} values, got {}", str(),
              local_numel(), local.str());
  Tensor box = global.reshape(block_shape);
  for (int d = 0; d < static_cast<int>(block_shape.size()); ++d)
    box = box.narrow(d, offsets[d], sizes[d]);
  box.copy_(local.contiguous().reshape(sizes));
}

namespace {

// Appends the boxes covering row-major elements [begin, end) of the part of `box` whose dims
// before `dim` are fixed at `offsets` (one index each) and whose later dims are whole.
void cover(const ShardSpec& box, size_t dim, Shape offsets, int64_t begin, int64_t end,
           std::vector<ShardSpec>& out) {
  const size_t dims = box.sizes.size();
  int64_t inner = 1;  // elements in one index of `dim`
  for (size_t k = dim + 1; k < dims; ++k) inner *= box.sizes[k];
  auto rows = [&](int64_t first, int64_t count) {
    ShardSpec s;
    s.global_shape = box.global_shape;
    s.block_shape = box.block_shape;
    s.offsets = offsets;
    s.sizes = Shape(dims, 1);
    s.offsets[dim] = box.offsets[dim] + first;
    s.sizes[dim] = count;
    for (size_t k = dim + 1; k < dims; ++k) {
      s.offsets[k] = box.offsets[k];
      s.sizes[k] = box.sizes[k];
    }
    s.local_shape = {s.local_numel()};
    out.push_back(std::move(s));
  };
  auto partial_row = [&](int64_t row, int64_t from, int64_t to) {
    offsets[dim] = box.offsets[dim] + row;
    cover(box, dim + 1, offsets, from - row * inner, to - row * inner, out);
  };
  const int64_t first_whole = (begin + inner - 1) / inner, end_whole = end / inner;
  if (first_whole > end_whole) {  // inside one row, touching neither of its ends
    partial_row(begin / inner, begin, end);
    return;
  }
  if (begin % inner != 0) partial_row(begin / inner, begin, first_whole * inner);
  if (end_whole > first_whole) rows(first_whole, end_whole - first_whole);
  if (end % inner != 0) partial_row(end_whole, end_whole * inner, end);
}

}  // namespace

std::vector<ShardSpec> ShardSpec::pieces(int64_t begin, int64_t length) const {
  BRAID_CHECK(begin >= 0 && length >= 0 && begin + length <= local_numel(),
              "elements [{}, {}) are not inside shard {} of {} elements", begin, begin + length,
              str(), local_numel());
  std::vector<ShardSpec> out;
  if (length == 0) return out;
  if (begin == 0 && length == local_numel()) return {*this};
  cover(*this, 0, Shape(sizes.size(), 0), begin, begin + length, out);
  return out;
}

std::string ShardSpec::str() const {
  std::string out = "[";
  for (size_t d = 0; d < block_shape.size(); ++d) {
    if (d) out += ", ";
    out += sizes[d] == block_shape[d]
               ? std::to_string(sizes[d])
               : fmt::format("{}/{} @{}", sizes[d], block_shape[d], offsets[d]);
  }
  return out + "] of " + shape_str(global_shape);
}

}  // namespace braid::nn
