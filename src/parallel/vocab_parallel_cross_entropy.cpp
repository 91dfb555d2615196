// Cross-entropy over logits split along the vocabulary: two small all-reduces per call (the
// row maxima, then the exp-sums with the target logits) instead of gathering the logits. Every
// step runs on the logits' device; nothing is read back there.
#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"
#include "braid/parallel/tensor_parallel.h"
#include "ops/loss_common.h"

namespace braid::parallel {

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    int64_t vocab_begin, int64_t num_classes, int64_t ignore_index,
                                    const ProcessGroupPtr& group) {
  BRAID_CHECK(logits.dtype() == DType::f32 && logits.dim() >= 1,
              "vocab-parallel cross_entropy logits must be f32, got {}", logits.str());
  BRAID_CHECK(targets.dtype() == DType::i32,
              "vocab-parallel cross_entropy targets must be i32, got {}", targets.str());
  const ops::OpDevice on("vocab-parallel cross_entropy",
                         {{"logits", logits}, {"targets", targets}});
  const Shape rows_shape(logits.shape().begin(), logits.shape().end() - 1);
  BRAID_CHECK(targets.shape() == rows_shape,
              "vocab-parallel cross_entropy targets {} do not match logits {}", targets.str(),
              logits.str());
  BRAID_CHECK(num_classes > 0 && vocab_begin >= 0,
              "vocab-parallel cross_entropy over {} classes from column {}", num_classes,
              vocab_begin);
  const int64_t vs = logits.size(-1), rows = targets.numel();
  const int64_t valid = std::clamp<int64_t>(num_classes - vocab_begin, 0, vs);
  Tensor lg = logits.detach().contiguous();
  lg = lg.alias({rows, vs}, {vs, 1}, lg.offset());
  Tensor tg = targets.detach().contiguous();
  tg = tg.alias({rows}, {1}, tg.offset());
  const int64_t counted =
      ops::checked_target_count(tg, num_classes, ignore_index, "vocab-parallel cross_entropy");
  // Global class ids -> this piece's columns.
  Tensor local_targets = on.empty({rows}, DType::i32);
  ops::kernel<ops::VocabShardTargetsKernel>(on.device())(tg, vocab_begin, valid, ignore_index,
                                                         local_targets);

  Tensor row_max = on.empty({rows});
  ops::kernel<ops::VocabShardMaxKernel>(on.device())(lg, valid, row_max);
  group->all_reduce(row_max, dist::ReduceOp::max)->wait();
  // One all-reduce carries both sums: row 0 the exp-sums, row 1 the target logits.
  Tensor sums = on.empty({2, rows});
  Tensor sum_exp = sums.alias({rows}, {1}, 0), target_logit = sums.alias({rows}, {1}, rows);
  ops::kernel<ops::VocabShardSumExpKernel>(on.device())(lg, local_targets, valid, row_max, sum_exp,
                                                        target_logit);
  group->all_reduce(sums, dist::ReduceOp::sum)->wait();

  Tensor lse = on.empty({rows}), losses = on.empty({rows});
  ops::kernel<ops::VocabShardLossKernel>(on.device())(row_max, sum_exp, target_logit, local_targets,
                                                      lse, losses);
  // As cross_entropy: with every target ignored the loss is 0 with no gradient.
  const float denom = counted > 0 ? static_cast<float>(counted) : 1.0f;
  Tensor out = ops::mean_loss(losses, denom);
  if (autograd::needs_grad({&logits})) {
    autograd::record("VocabParallelCrossEntropy", {logits}, {&out},
                     [lg, local_targets, lse, valid, denom, on,
                      shape = logits.shape()](const std::vector<Tensor>& g) {
                       Tensor dlogits = on.empty(shape);
                       Tensor d2 = dlogits.alias(lg.shape(), lg.strides(), 0);
                       // On a device the incoming gradient is applied there, after the kernel.
                       const float scale = on.is_cpu() ? g[0].item() / denom : 1.0f / denom;
                       ops::kernel<ops::VocabShardBackwardKernel>(on.device())(
                           lg, local_targets, valid, lse, scale, d2);
                       if (!on.is_cpu()) ops::mul_by_device_scalar_(dlogits, g[0]);
                       return std::vector<Tensor>{dlogits};
                     });
  }
  return out;
}

}  // namespace braid::parallel
