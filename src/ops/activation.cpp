// GELU and softmax ops: dispatch and gradients.
#include "braid/ops/activation.h"

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid {

Tensor gelu(const Tensor& x) {
  BRAID_CHECK(x.dtype() == DType::f32, "gelu computes in f32, got {}", x.str());
  Tensor in = x.detach().contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  ops::kernel<ops::GeluForwardKernel>(x.device())(in, out);
  if (autograd::needs_grad({&x})) {
    autograd::record("Gelu", {x}, {&out}, [in](const std::vector<Tensor>& g) {
      Tensor dx = Tensor::empty(in.shape(), DType::f32, in.device());
      ops::kernel<ops::GeluBackwardKernel>(in.device())(in, g[0].contiguous(), dx);
      return std::vector<Tensor>{dx};
    });
  }
  return out;
}

Tensor softmax(const Tensor& x) {
  BRAID_CHECK(x.dtype() == DType::f32 && x.dim() >= 1, "softmax needs an f32 tensor, got {}",
              x.str());
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  ops::kernel<ops::SoftmaxForwardKernel>(x.device())(x.detach().contiguous(), out);
  if (autograd::needs_grad({&x})) {
    Tensor y = out.detach();
    autograd::record("Softmax", {x}, {&out}, [y](const std::vector<Tensor>& g) {
      Tensor dx = Tensor::empty(y.shape(), DType::f32, y.device());
      ops::kernel<ops::SoftmaxBackwardKernel>(y.device())(y, g[0].contiguous(), dx);
      return std::vector<Tensor>{dx};
    });
  }
  return out;
}

}  // namespace braid
