// Row-wise iteration over N-d strided views: the building block of copies and broadcasts.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::detail {

// Calls fn(row, offset_0, ..., offset_{N-1}) for every row of `shape` (all dims but the last),
// where offset_i is the element offset of that row's first element under strides[i]. Rows
// are independent, so callers may run this over a range of rows from several threads.
template <size_t N, class Fn>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides, int64_t row_begin,
                  int64_t row_end, Fn&& fn) {
  const int outer_dims = static_cast<int>(shape.size()) - 1;
  std::vector<int64_t> index(outer_dims > 0 ? outer_dims : 0);
  // Unravel the first row index once, then step like an odometer.
  int64_t rem = row_begin;
  for (int d = outer_dims - 1; d >= 0; --d) {
    index[d] = rem % shape[d];
    rem /= shape[d];
  }
  std::array<int64_t, N> off{};
  for (size_t i = 0; i < N; ++i)
    for (int d = 0; d < outer_dims; ++d) off[i] += index[d] * (*strides[i])[d];
  for (int64_t row = row_begin; row < row_end; ++row) {
    std::apply([&](auto... o) { fn(row, o...); }, off);
    for (int d = outer_dims - 1; d >= 0; --d) {
      ++index[d];
      for (size_t i = 0; i < N; ++i) off[i] += (*strides[i])[d];
      if (index[d] < shape[d]) break;
      for (size_t i = 0; i < N; ++i) off[i] -= shape[d] * (*strides[i])[d];
      index[d] = 0;
    }
  }
}

inline int64_t num_rows(const Shape& shape) {
  if (shape.empty()) return 1;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  return rows;
}

inline int64_t row_length(const Shape& shape) {
  return shape.empty() ? 1 : shape.back();
}

}  // namespace braid::detail
