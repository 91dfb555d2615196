// cross_entropy op: target checks, the fused kernel, and mean-over-valid-targets gradient.
#include "braid/ops/loss.h"

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"
#include "ops/loss_common.h"

namespace braid {
namespace {

// reuse_logits: the fused kernel may write the gradient over the logits' memory.
Tensor cross_entropy_impl(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                          int64_t ignore_index, bool reuse_logits) {
  BRAID_CHECK(logits.dtype() == DType::f32 && logits.dim() >= 1,
              "cross_entropy logits must be f32, got {}", logits.str());
  BRAID_CHECK(targets.dtype() == DType::i32, "cross_entropy targets must be i32, got {}",
              targets.str());
  const ops::OpDevice on("cross_entropy", {{"logits", logits}, {"targets", targets}});
  const int64_t vp = logits.size(-1);
  if (num_classes < 0) num_classes = vp;
  BRAID_CHECK(num_classes > 0 && num_classes <= vp,
              "cross_entropy over {} classes but logits have only {} columns", num_classes, vp);
  Shape expect(logits.shape().begin(), logits.shape().end() - 1);
  BRAID_CHECK(targets.shape() == expect, "cross_entropy targets {} do not match logits {}",
              targets.str(), logits.str());
  const int64_t rows = targets.numel();
  Tensor lg = logits.detach().contiguous();
  lg = lg.alias({rows, vp}, {vp, 1}, lg.offset());
  Tensor tg = targets.detach().contiguous();
  tg = tg.alias({rows}, {1}, tg.offset());
  const int64_t counted = ops::checked_target_count(tg, num_classes, ignore_index, "cross_entropy");
  // With every target ignored the mean is 0/0; PyTorch returns NaN, we return 0 with no gradient.
  const float denom = counted > 0 ? static_cast<float>(counted) : 1.0f;
  Tensor losses = on.empty({rows});
  const bool with_grad = autograd::needs_grad({&logits});
  const auto& registry = ops::KernelRegistry::instance();
  if (with_grad && registry.has(ops::CrossEntropyFusedKernel::kName, on.device().kind)) {
    // The loss is about to be backpropagated (its gradient is almost always 1): the gradient for
    // an incoming 1 is computed now, while each row of logits is read anyway, instead of reading
    // all the logits again in the backward.
    Tensor dlogits = reuse_logits ? logits.detach() : on.empty(logits.shape());
    Tensor d2 = dlogits.alias(lg.shape(), lg.strides(), dlogits.offset());
    registry.get<ops::CrossEntropyFusedKernel>(on.device().kind)(lg, tg, num_classes, ignore_index,
                                                                 1.0f / denom, losses, d2);
    Tensor out = ops::mean_loss(losses, denom);
    autograd::record("CrossEntropy", {logits}, {&out}, [dlogits](const std::vector<Tensor>& g) {
      Tensor d = dlogits;  // the node owns d: scaled in place
      if (!d.device().is_cpu()) {
        ops::mul_by_device_scalar_(d, g[0]);
      } else if (const float incoming = g[0].item(); incoming != 1.0f) {
        scale_(d, incoming);
      }
      return std::vector<Tensor>{d};
    });
    return out;
  }
  Tensor lse = on.empty({rows});
  ops::kernel<ops::CrossEntropyForwardKernel>(on.device())(lg, tg, num_classes, ignore_index,
                                                           losses, lse);
  Tensor out = ops::mean_loss(losses, denom);
  if (with_grad) {
    autograd::record("CrossEntropy", {logits}, {&out},
                     [lg, tg, lse, on, num_classes, ignore_index, denom,
                      shape = logits.shape()](const std::vector<Tensor>& g) {
                       Tensor dlogits = on.empty(shape);
                       Tensor d2 = dlogits.alias(lg.shape(), lg.strides(), 0);
                       // On a device the incoming gradient is applied there, after the kernel.
                       const float scale = on.is_cpu() ? g[0].item() / denom : 1.0f / denom;
                       ops::kernel<ops::CrossEntropyBackwardKernel>(on.device())(
                           lg, tg, lse, num_classes, ignore_index, scale, d2);
                       if (!on.is_cpu()) ops::mul_by_device_scalar_(dlogits, g[0]);
                       return std::vector<Tensor>{dlogits};
                     });
  }
  return out;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                     int64_t ignore_index) {
  return cross_entropy_impl(logits, targets, num_classes, ignore_index, false);
}

Tensor cross_entropy(Tensor&& logits, const Tensor& targets, int64_t num_classes,
                     int64_t ignore_index) {
  const Tensor owned = std::move(logits);
  // Only where no handle, view or saved tensor could see the logits afterwards; and only on
  // the CPU, whose fused kernel is written to read each row before it overwrites it.
  const bool reuse = owned.defined() && owned.device().is_cpu() && owned.is_contiguous() &&
                     owned.impl_ptr().use_count() == 1 && owned.storage().use_count() == 1;
  return cross_entropy_impl(owned, targets, num_classes, ignore_index, reuse);
}

}  // namespace braid
