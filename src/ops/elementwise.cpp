// Elementwise ops: broadcasting, dispatch to the binary/affine kernels, and their gradients.
#include "braid/ops/elementwise.h"

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"
#include "braid/ops/reduce.h"

namespace braid {
namespace {

using ops::BinaryOp;

// A zero-stride view of t with `shape` (t's shape must broadcast to it).
Tensor broadcast_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  Shape strides(shape.size(), 0);
  const int lead = static_cast<int>(shape.size()) - t.dim();
  for (int i = 0; i < t.dim(); ++i) strides[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return t.alias(shape, strides, t.offset());
}

Tensor binary(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  BRAID_CHECK(a.dtype() == DType::f32 && b.dtype() == DType::f32,
              "elementwise ops compute in f32; got {} and {}", a.str(), b.str());
  const ops::OpDevice on(name, {{"a", a}, {"b", b}});
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = on.empty(shape);
  ops::kernel<ops::BinaryKernel>(on.device())(op, broadcast_to(a, shape), broadcast_to(b, shape),
                                              out);
  return out;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BRAID_CHECK(da == db || da == 1 || db == 1, "shapes {} and {} do not broadcast", shape_str(a),
                shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary("add", BinaryOp::add, a, b);
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("Add", {a, b}, {&out},
                     [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{sum_to_shape(g[0], sa), sum_to_shape(g[0], sb)};
                     });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary("sub", BinaryOp::sub, a, b);
  if (autograd::needs_grad({&a, &b})) {
    autograd::record(
        "Sub", {a, b}, {&out}, [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
          return std::vector<Tensor>{sum_to_shape(g[0], sa), scale(sum_to_shape(g[0], sb), -1.0f)};
        });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary("mul", BinaryOp::mul, a, b);
  if (autograd::needs_grad({&a, &b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    Tensor saved_a = need_b ? a.detach() : Tensor(), saved_b = need_a ? b.detach() : Tensor();
    autograd::record(
        "Mul", {a, b}, {&out},
        [saved_a, saved_b, sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
          Tensor ga = saved_b.defined() ? sum_to_shape(mul(g[0], saved_b), sa) : Tensor();
          Tensor gb = saved_a.defined() ? sum_to_shape(mul(g[0], saved_a), sb) : Tensor();
          return std::vector<Tensor>{ga, gb};
        });
  }
  return out;
}

Tensor scale(const Tensor& x, float alpha) {
  Tensor dense = x.detach().contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  ops::kernel<ops::AffineKernel>(x.device())(dense, alpha, 0.0f, out);
  if (autograd::needs_grad({&x})) {
    autograd::record("Scale", {x}, {&out}, [alpha](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{scale(g[0], alpha)};
    });
  }
  return out;
}

void add_(Tensor& a, const Tensor& b) {
  BRAID_CHECK(a.dtype() == DType::f32 && b.dtype() == DType::f32,
              "add_ computes in f32; got {} and {}", a.str(), b.str());
  BRAID_CHECK(broadcast_shapes(a.shape(), b.shape()) == a.shape(),
              "add_: {} does not broadcast into {}", b.str(), a.str());
  const ops::OpDevice on("add_", {{"a", a}, {"b", b}});
  ops::kernel<ops::BinaryKernel>(on.device())(BinaryOp::add, a, broadcast_to(b, a.shape()), a);
}

void scale_(Tensor& x, float alpha) {
  BRAID_CHECK(x.is_contiguous(), "scale_ needs a dense tensor, got a strided {}", x.str());
  ops::kernel<ops::AffineKernel>(x.device())(x, alpha, 0.0f, x);
}

}  // namespace braid
