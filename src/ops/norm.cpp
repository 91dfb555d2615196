// layer_norm op: shape checks, dispatch and gradients for input, weight and bias.
#include "braid/ops/norm.h"

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  BRAID_CHECK(x.dtype() == DType::f32 && x.dim() >= 1, "layer_norm needs an f32 input, got {}",
              x.str());
  const int64_t c = x.size(-1);
  BRAID_CHECK(weight.shape() == Shape{c} && bias.shape() == Shape{c},
              "layer_norm over {} features needs weight and bias of shape [{}], got {} and {}", c,
              c, weight.str(), bias.str());
  BRAID_CHECK(eps > 0, "layer_norm eps must be > 0, got {}", eps);
  const int64_t rows = x.numel() / std::max<int64_t>(c, 1);
  Tensor in = x.detach().contiguous();
  in = in.alias({rows, c}, {c, 1}, in.offset());
  Tensor w = weight.detach().contiguous(), b = bias.detach().contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  Tensor out2 = out.alias({rows, c}, {c, 1}, 0);
  Tensor mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  ops::kernel<ops::LayerNormForwardKernel>(x.device())(in, w, b, eps, out2, mean, rstd);
  if (autograd::needs_grad({&x, &weight, &bias})) {
    autograd::record("LayerNorm", {x, weight, bias}, {&out},
                     [in, w, mean, rstd, shape = x.shape()](const std::vector<Tensor>& g) {
                       Tensor dy = g[0].contiguous();
                       dy = dy.alias(in.shape(), in.strides(), dy.offset());
                       Tensor dx = Tensor::empty(shape, DType::f32, in.device());
                       Tensor dx2 = dx.alias(in.shape(), in.strides(), 0);
                       Tensor dw = Tensor::empty(w.shape()), db = Tensor::empty(w.shape());
                       ops::kernel<ops::LayerNormBackwardKernel>(in.device())(in, w, mean, rstd, dy,
                                                                              dx2, dw, db);
                       return std::vector<Tensor>{dx, dw, db};
                     });
  }
  return out;
}

}  // namespace braid
