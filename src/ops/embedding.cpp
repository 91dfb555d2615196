// embedding op: id checks, gather dispatch and the scatter-add gradient.
#include "braid/ops/embedding.h"

#include <unordered_map>
#include <vector>

#include "braid/autograd/node.h"
#include "braid/ops/host_checked.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"

namespace braid {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  BRAID_CHECK(weight.dtype() == DType::f32 && weight.dim() == 2,
              "embedding weight must be f32 [V, C], got {}", weight.str());
  BRAID_CHECK(ids.dtype() == DType::i32, "embedding ids must be i32, got {}", ids.str());
  const ops::OpDevice on("embedding", {{"weight", weight}, {"ids", ids}});
  const int64_t c = weight.size(1);
  Tensor flat_ids = ids.detach().contiguous();
  flat_ids = flat_ids.alias({ids.numel()}, {1}, flat_ids.offset());
  Shape out_shape = ids.shape();
  out_shape.push_back(c);
  // The ids are checked on the host. A device's come over once, and the backward groups them
  // from the same host copy, unless the host checked them before copying them there
  // (host_checked.h): then nothing comes back, and the backward scatters into a zeroed table.
  const Tensor host_ids =
      ops::check_ids_in_range(flat_ids, weight.size(0), "embedding's vocabulary");
  Tensor out = on.empty(out_shape);
  Tensor out2 = out.alias({ids.numel(), c}, {c, 1}, 0);
  Tensor w = weight.detach().contiguous();
  ops::kernel<ops::EmbeddingForwardKernel>(on.device())(w, flat_ids, out2);
  if (autograd::needs_grad({&weight})) {
    autograd::record(
        "Embedding", {weight}, {&out},
        [flat_ids, host_ids, on, wshape = weight.shape(), c,
         leaf = weight.is_leaf() ? weight : Tensor()](const std::vector<Tensor>& g) {
          Tensor dy = g[0].contiguous();
          dy = dy.alias({flat_ids.numel(), c}, {c, 1}, dy.offset());
          const auto scatter = ops::kernel<ops::EmbeddingBackwardKernel>(on.device());
          // Without host ids (checked on the host, never read back) the
          // gradient goes through the zeroed table: the same sums, added once.
          Tensor direct = host_ids.defined() ? autograd::direct_grad(leaf) : Tensor();
          if (!direct.defined()) {
            Tensor dw = on.zeros(wshape);
            scatter(flat_ids, dy, dw);
            return std::vector<Tensor>{dw};
          }
          // Straight into the table's .grad, without the zeroed [V, C] temporary and
          // the pass adding it in (the vocabulary makes both far larger than the
          // rows used). The rows of each id are first summed from zero, in token
          // order, then added once: the same rounding as adding the temporary, so
          // a gradient is bitwise the same whether .grad existed or not.
          const int32_t* id = host_ids.data<int32_t>();
          std::unordered_map<int32_t, int32_t> slot_of;
          std::vector<int32_t> slots(flat_ids.numel()), used;
          for (int64_t n = 0; n < flat_ids.numel(); ++n) {
            auto [it, fresh] = slot_of.try_emplace(id[n], static_cast<int32_t>(used.size()));
            if (fresh) used.push_back(id[n]);
            slots[n] = it->second;
          }
          const int64_t rows = static_cast<int64_t>(used.size());
          Tensor sums = on.zeros({rows, c});
          scatter(Tensor::from_vector(slots, {flat_ids.numel()}, on.device()), dy, sums);
          scatter(Tensor::from_vector(used, {rows}, on.device()), sums, direct);
          return std::vector<Tensor>{Tensor()};
        });
  }
  return out;
}

}  // namespace braid
