// layer_norm op: shape checks, dispatch and gradients for input, weight and bias.
#include "braid/ops/norm.h"

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"

namespace braid {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  BRAID_CHECK(x.dtype() == DType::f32 && x.dim() >= 1, "layer_norm needs an f32 input, got {}",
              x.str());
  const int64_t c = x.size(-1);
  BRAID_CHECK(weight.shape() == Shape{c} && bias.shape() == Shape{c},
              "layer_norm over {} features needs weight and bias of shape [{}], got {} and {}", c,
              c, weight.str(), bias.str());
  BRAID_CHECK(eps > 0, "layer_norm eps must be > 0, got {}", eps);
  const ops::OpDevice on("layer_norm", {{"x", x}, {"weight", weight}, {"bias", bias}});
  const int64_t rows = x.numel() / std::max<int64_t>(c, 1);
  Tensor in = x.detach().contiguous();
  in = in.alias({rows, c}, {c, 1}, in.offset());
  Tensor w = weight.detach().contiguous(), b = bias.detach().contiguous();
  Tensor out = on.empty(x.shape());
  Tensor out2 = out.alias({rows, c}, {c, 1}, 0);
  Tensor mean = on.empty({rows}), rstd = on.empty({rows});
  ops::kernel<ops::LayerNormForwardKernel>(on.device())(in, w, b, eps, out2, mean, rstd);
  if (autograd::needs_grad({&x, &weight, &bias})) {
    autograd::record("LayerNorm", {x, weight, bias}, {&out},
                     [in, w, mean, rstd, on, shape = x.shape()](const std::vector<Tensor>& g) {
                       Tensor dy = g[0].contiguous();
                       dy = dy.alias(in.shape(), in.strides(), dy.offset());
                       Tensor dx = on.empty(shape);
                       Tensor dx2 = dx.alias(in.shape(), in.strides(), 0);
                       Tensor dw = on.empty(w.shape()), db = on.empty(w.shape());
                       ops::kernel<ops::LayerNormBackwardKernel>(on.device())(in, w, mean, rstd, dy,
                                                                              dx2, dw, db);
                       return std::vector<Tensor>{dx, dw, db};
                     });
  }
  return out;
}

}  // namespace braid
