// CUDA layer norm over the last dim of x [N, C], forward and backward.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// y = (x - mean) * rstd * weight + bias per row; mean and rstd [N] are saved for backward.
// x, y dense [N, C]; weight, bias dense [C]. One block per row; the CPU kernel's formulas,
// with tree-ordered float sums instead of sequential ones.
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd);
// dx per row (one block per row); dweight and dbias (overwritten) are column sums over all rows,
// taken without atomics: per-chunk partials, then a pass adding them in chunk order, so the
// result is reproducible run to run.
void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dweight,
                         Tensor& dbias);

}  // namespace braid::cuda
