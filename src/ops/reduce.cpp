// Reductions: whole-tensor sum/mean with gradients, and broadcast-undoing sums.
#include "braid/ops/reduce.h"

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid {
namespace {

// sum(x) / divisor as a scalar on x's device. On the host the sum comes from the SumKernel in
// double and is divided there; on a device it stays there (sum_to's double partials rounded
// once, then one multiply by 1 / divisor in f32), so a reduction never waits for the device.
Tensor total(const Tensor& x, double divisor) {
  if (x.device().is_cpu()) {
    double s = 0, sq = 0;
    ops::kernel<ops::SumKernel>(x.device())(x.detach().contiguous(), &s, &sq);
    return Tensor::full({}, static_cast<float>(s / divisor));
  }
  // A fresh scalar (sum_to_shape would hand back a 0-d x itself), which sum_to adds into.
  Tensor out = Tensor::zeros({}, DType::f32, x.device());
  ops::kernel<ops::SumToKernel>(x.device())(x.detach().contiguous(), out);
  if (divisor != 1.0) scale_(out, static_cast<float>(1.0 / divisor));
  return out;
}

// A gradient of value g (a scalar tensor) times `factor`, spread over `shape` as a dense tensor
// on g's device. On a device the value is broadcast there instead of read back to the host.
Tensor spread(const Tensor& g, const Shape& shape, float factor) {
  Tensor out = Tensor::empty(shape, DType::f32, g.device());
  if (g.device().is_cpu()) {
    out.fill_(g.item() * factor);
    return out;
  }
  out.copy_(g.alias(shape, Shape(shape.size(), 0), g.offset()));
  if (factor != 1.0f) scale_(out, factor);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) {
  Tensor out = total(x, 1.0);
  if (autograd::needs_grad({&x})) {
    autograd::record("Sum", {x}, {&out}, [shape = x.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{spread(g[0], shape, 1.0f)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x) {
  BRAID_CHECK(x.numel() > 0, "mean of an empty tensor {}", x.str());
  const double n = static_cast<double>(x.numel());
  Tensor out = total(x, n);
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
