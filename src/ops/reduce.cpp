// Reductions: whole-tensor sum/mean with gradients, and broadcast-undoing sums.
#include "braid/ops/reduce.h"

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid {
namespace {

Tensor scalar_like(float value) {
  return Tensor::full({}, value);
}

// A gradient of value g (a scalar tensor) spread over `shape`, as a dense tensor.
Tensor spread(const Tensor& g, const Shape& shape, float factor) {
  Tensor out = Tensor::empty(shape);
  out.fill_(g.item() * factor);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) {
  double s = 0, sq = 0;
  ops::kernel<ops::SumKernel>(x.device())(x.detach().contiguous(), &s, &sq);
  Tensor out = scalar_like(static_cast<float>(s));
  if (autograd::needs_grad({&x})) {
    autograd::record("Sum", {x}, {&out}, [shape = x.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{spread(g[0], shape, 1.0f)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x) {
  BRAID_CHECK(x.numel() > 0, "mean of an empty tensor {}", x.str());
  double s = 0, sq = 0;
  ops::kernel<ops::SumKernel>(x.device())(x.detach().contiguous(), &s, &sq);
  const double n = static_cast<double>(x.numel());
  Tensor out = scalar_like(static_cast<float>(s / n));
  if (autograd::needs_grad({&x})) {
    autograd::record("Mean", {x}, {&out}, [shape = x.shape(), n](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{spread(g[0], shape, static_cast<float>(1.0 / n))};
    });
  }
  return out;
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  BRAID_CHECK(broadcast_shapes(shape, x.shape()) == x.shape(),
              "sum_to_shape: {} does not broadcast to {}", shape_str(shape), x.str());
  Tensor out = Tensor::zeros(shape, DType::f32, x.device());
  ops::kernel<ops::SumToKernel>(x.device())(x.detach().contiguous(), out);
  return out;
}

double sum_of_squares(const Tensor& x) {
  double s = 0, sq = 0;
  ops::kernel<ops::SumKernel>(x.device())(x.detach().contiguous(), &s, &sq);
  return sq;
}

}  // namespace braid
