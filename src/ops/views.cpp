// Differentiable views: each aliases its input's storage and maps gradients back to its shape.
#include "braid/ops/views.h"

#include <numeric>
#include <optional>

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/op_device.h"

namespace braid {
namespace {

// Strides that let `shape` view memory laid out as (old_shape, old_strides), if any exist:
// dims may merge only where the old layout is contiguous across them.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& shape) {
  if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(shape);
  Shape strides(shape.size());
  int view_d = static_cast<int>(shape.size()) - 1;
  int64_t chunk_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = static_cast<int>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    const bool chunk_ends =
        d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      strides[view_d] = view_numel * chunk_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

Shape infer_shape(const Tensor& x, Shape shape) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      BRAID_CHECK(infer < 0, "reshape of {} to {}: only one dimension may be -1", x.str(),
                  shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      BRAID_CHECK(shape[i] >= 0, "reshape of {} to {}: negative dimension", x.str(),
                  shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    BRAID_CHECK(known > 0 && x.numel() % known == 0, "cannot reshape {} ({} elements) to {}",
                x.str(), x.numel(), shape_str(shape));
    shape[infer] = x.numel() / known;
  }
  BRAID_CHECK(shape_numel(shape) == x.numel(), "cannot reshape {} ({} elements) to {}", x.str(),
              x.numel(), shape_str(shape));
  return shape;
}

}  // namespace

Tensor reshape(const Tensor& x, Shape shape) {
  shape = infer_shape(x, std::move(shape));
  Tensor out;
  if (auto strides = view_strides(x.shape(), x.strides(), shape)) {
    out = x.alias(shape, *strides, x.offset());
  } else {
    out = x.detach().clone().alias(shape, contiguous_strides(shape), 0);
  }
  if (autograd::needs_grad({&x})) {
    Shape in_shape = x.shape();
    autograd::record("Reshape", {x}, {&out}, [in_shape](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{reshape(g[0], in_shape)};
    });
  }
  return out;
}

Tensor permute(const Tensor& x, const std::vector<int>& order) {
  BRAID_CHECK(static_cast<int>(order.size()) == x.dim(), "permute of {} needs {} dims, got {}",
              x.str(), x.dim(), order.size());
  Shape shape(order.size()), strides(order.size());
  std::vector<bool> used(order.size(), false);
  std::vector<int> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const int d = x.normalize_dim(order[i]);
    BRAID_CHECK(!used[d], "permute of {}: dimension {} repeated", x.str(), d);
    used[d] = true;
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
    inverse[d] = static_cast<int>(i);
  }
  Tensor out = x.alias(shape, strides, x.offset());
  if (autograd::needs_grad({&x})) {
    autograd::record("Permute", {x}, {&out}, [inverse](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{permute(g[0], inverse)};
    });
  }
  return out;
}

Tensor transpose(const Tensor& x, int dim_a, int dim_b) {
  std::vector<int> order(x.dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[x.normalize_dim(dim_a)], order[x.normalize_dim(dim_b)]);
  return permute(x, order);
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
  const int d = x.normalize_dim(dim);
  BRAID_CHECK(start >= 0 && length >= 0 && start + length <= x.shape()[d],
              "narrow of {} along dim {}: [{}, {}) is outside [0, {})", x.str(), d, start,
              start + length, x.shape()[d]);
  Shape shape = x.shape();
  shape[d] = length;
  Tensor out = x.alias(shape, x.strides(), x.offset() + start * x.strides()[d]);
  if (autograd::needs_grad({&x})) {
    Shape in_shape = x.shape();
    autograd::record("Narrow", {x}, {&out},
                     [in_shape, d, start, length](const std::vector<Tensor>& g) {
                       Tensor full = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
                       full.narrow(d, start, length).copy_(g[0]);
                       return std::vector<Tensor>{full};
                     });
  }
  return out;
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) {
    autograd::needs_grad({&x});  // a returned input is still a use (recompute discovers it)
    return x;
  }
  Tensor out = x.detach().clone();
  if (autograd::needs_grad({&x})) {
    autograd::record("Contiguous", {x}, {&out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& xs, int dim) {
  BRAID_CHECK(!xs.empty(), "cat of an empty list");
  const ops::OpDevice on("cat", xs, "input");
  const int d = xs[0].normalize_dim(dim);
  Shape shape = xs[0].shape();
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Tensor& t : xs) {
    BRAID_CHECK(t.dim() == xs[0].dim() && t.dtype() == xs[0].dtype(), "cat: {} does not match {}",
                t.str(), xs[0].str());
    for (int i = 0; i < t.dim(); ++i)
      BRAID_CHECK(i == d || t.shape()[i] == shape[i],
                  "cat along dim {}: {} and {} differ in dim {}", d, xs[0].str(), t.str(), i);
    sizes.push_back(t.shape()[d]);
    total += t.shape()[d];
  }
  shape[d] = total;
  Tensor out = on.empty(shape, xs[0].dtype());
  int64_t at = 0;
  for (const Tensor& t : xs) {
    out.detach().narrow(d, at, t.shape()[d]).copy_(t);
    at += t.shape()[d];
  }
  if (autograd::needs_grad(xs)) {
    autograd::record("Cat", xs, {&out}, [sizes, d](const std::vector<Tensor>& g) {
      std::vector<Tensor> grads;
      int64_t at = 0;
      for (int64_t s : sizes) {
        grads.push_back(g[0].narrow(d, at, s));  // backward runs without history
        at += s;
      }
      return grads;
    });
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim) {
  const int d = x.normalize_dim(dim);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  BRAID_CHECK(total == x.shape()[d], "split of {} along dim {} into sizes summing to {}", x.str(),
              d, total);
  std::vector<Tensor> outs;
  int64_t at = 0;
  Tensor base = x.detach();
  for (int64_t s : sizes) {
    outs.push_back(base.narrow(d, at, s));
    at += s;
  }
  if (autograd::needs_grad({&x})) {
    std::vector<Tensor*> ptrs;
    for (Tensor& o : outs) ptrs.push_back(&o);
    autograd::record("Split", {x}, ptrs,
                     [d](const std::vector<Tensor>& g) { return std::vector<Tensor>{cat(g, d)}; });
  }
  return outs;
}

}  // namespace braid
