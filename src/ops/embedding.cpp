// embedding op: id checks, gather dispatch and the scatter-add gradient.
#include "braid/ops/embedding.h"

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  BRAID_CHECK(weight.dtype() == DType::f32 && weight.dim() == 2,
              "embedding weight must be f32 [V, C], got {}", weight.str());
  BRAID_CHECK(ids.dtype() == DType::i32, "embedding ids must be i32, got {}", ids.str());
  const int64_t c = weight.size(1);
  Tensor flat_ids = ids.detach().contiguous();
  flat_ids = flat_ids.alias({ids.numel()}, {1}, flat_ids.offset());
  Shape out_shape = ids.shape();
  out_shape.push_back(c);
  const int32_t* id = flat_ids.data<int32_t>();
  for (int64_t i = 0; i < flat_ids.numel(); ++i)
    BRAID_CHECK(id[i] >= 0 && id[i] < weight.size(0),
                "token id {} at position {} is outside the embedding's vocabulary [0, {})", id[i],
                i, weight.size(0));
  Tensor out = Tensor::empty(out_shape, DType::f32, weight.device());
  Tensor out2 = out.alias({ids.numel(), c}, {c, 1}, 0);
  Tensor w = weight.detach().contiguous();
  ops::kernel<ops::EmbeddingForwardKernel>(weight.device())(w, flat_ids, out2);
  if (autograd::needs_grad({&weight})) {
    autograd::record("Embedding", {weight}, {&out},
                     [flat_ids, wshape = weight.shape(), c](const std::vector<Tensor>& g) {
                       Tensor dw = Tensor::zeros(wshape);
                       Tensor dy = g[0].contiguous();
                       dy = dy.alias({flat_ids.numel(), c}, {c, 1}, dy.offset());
                       ops::kernel<ops::EmbeddingBackwardKernel>(dw.device())(flat_ids, dy, dw);
                       return std::vector<Tensor>{dw};
                     });
  }
  return out;
}

}  // namespace braid
