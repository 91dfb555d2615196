// How a strided matrix view is handed to a row-major BLAS call (OpenBLAS and cuBLAS backends).
#pragma once

#include <algorithm>
#include <cstdint>

#include "braid/core/error.h"

namespace braid::ops {

// A matrix view as a row-major BLAS operand: its leading dimension, and whether the op to apply
// to that row-major matrix is a transpose.
struct RowMajorOperand {
  bool transposed;
  int64_t ld;
};

// rows x cols with strides (s0, s1); `trans` asks for op(M) = M^T. A column-major matrix is the
// row-major storage of its transpose, which flips the requested op; any other layout is an
// error naming `role` (the caller copies such views to dense first).
inline RowMajorOperand as_row_major(int64_t rows, int64_t cols, int64_t s0, int64_t s1, bool trans,
                                    const char* role) {
  if (s1 == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : s0;
    if (ld >= std::max<int64_t>(cols, 1)) return {trans, ld};
  }
  if (s0 == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : s1;
    if (ld >= std::max<int64_t>(rows, 1)) return {!trans, ld};
  }
  BRAID_FAIL("gemm: {} is a {}x{} matrix with strides ({}, {}), neither row- nor column-major",
             role, rows, cols, s0, s1);
}

}  // namespace braid::ops
