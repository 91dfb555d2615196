// Differentiable views and layout ops: reshape, transpose, permute, narrow, contiguous, cat, split.
//
// Views share storage with their input; their backward maps the gradient back to the
// input's shape. reshape copies only when the requested shape cannot be a view.
#pragma once

#include <vector>

#include "braid/core/tensor.h"

namespace braid {

Tensor reshape(const Tensor& x, Shape shape);  // one dim may be -1
Tensor transpose(const Tensor& x, int dim_a, int dim_b);
Tensor permute(const Tensor& x, const std::vector<int>& order);
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);
Tensor contiguous(const Tensor& x);
Tensor cat(const std::vector<Tensor>& xs, int dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim);

}  // namespace braid
