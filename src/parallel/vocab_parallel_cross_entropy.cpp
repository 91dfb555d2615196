// Cross-entropy over logits split along the vocabulary: two small all-reduces per call (the
// row maxima, then the exp-sums with the target logits) instead of gathering the logits.
#include <cmath>

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/parallel/tensor_parallel.h"

namespace braid::parallel {

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    int64_t vocab_begin, int64_t num_classes, int64_t ignore_index,
                                    const ProcessGroupPtr& group) {
  BRAID_CHECK(logits.dtype() == DType::f32 && logits.dim() >= 1,
              "vocab-parallel cross_entropy logits must be f32, got {}", logits.str());
  BRAID_CHECK(targets.dtype() == DType::i32,
              "vocab-parallel cross_entropy targets must be i32, got {}", targets.str());
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
  const Tensor tg = targets.contiguous();
  const int32_t* t = tg.data<int32_t>();
  // Global class ids -> this piece's columns.
  std::vector<int32_t> local(rows);
  int64_t counted = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (t[i] == ignore_index) {
      local[i] = ops::kTargetIgnored;
      continue;
    }
    BRAID_CHECK(t[i] >= 0 && t[i] < num_classes,
                "cross_entropy target {} at position {} is outside [0, {}) (ignore_index is {})",
                t[i], i, num_classes, ignore_index);
    ++counted;
    const int64_t column = t[i] - vocab_begin;
    local[i] = column >= 0 && column < valid ? static_cast<int32_t>(column) : ops::kTargetElsewhere;
  }
  const Tensor local_targets = Tensor::from_vector(local, {rows});

  const Device device = logits.device();
  Tensor row_max = Tensor::empty({rows});
  ops::kernel<ops::VocabShardMaxKernel>(device)(lg, valid, row_max);
  group->all_reduce(row_max, dist::ReduceOp::max)->wait();
  // One all-reduce carries both sums: row 0 the exp-sums, row 1 the target logits.
  Tensor sums = Tensor::empty({2, rows});
  Tensor sum_exp = sums.alias({rows}, {1}, 0), target_logit = sums.alias({rows}, {1}, rows);
  ops::kernel<ops::VocabShardSumExpKernel>(device)(lg, local_targets, valid, row_max, sum_exp,
                                                   target_logit);
  group->all_reduce(sums, dist::ReduceOp::sum)->wait();

  Tensor lse = Tensor::empty({rows});
  const float *mx = row_max.data<float>(), *se = sum_exp.data<float>(),
              *tl = target_logit.data<float>();
  float* l = lse.data<float>();
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    l[i] = mx[i] + std::log(se[i]);
    if (local[i] != ops::kTargetIgnored) total += l[i] - tl[i];
  }
  // As cross_entropy: with every target ignored the loss is 0 with no gradient.
  const float denom = counted > 0 ? static_cast<float>(counted) : 1.0f;
  Tensor out = Tensor::full({}, static_cast<float>(total / denom));
  if (autograd::needs_grad({&logits})) {
    autograd::record("VocabParallelCrossEntropy", {logits}, {&out},
                     [lg, local_targets, lse, valid, denom,
                      shape = logits.shape()](const std::vector<Tensor>& g) {
                       Tensor dlogits = Tensor::empty(shape, DType::f32, lg.device());
                       Tensor d2 = dlogits.alias(lg.shape(), lg.strides(), 0);
                       ops::kernel<ops::VocabShardBackwardKernel>(lg.device())(
                           lg, local_targets, valid, lse, g[0].item() / denom, d2);
                       return std::vector<Tensor>{dlogits};
                     });
  }
  return out;
}

}  // namespace braid::parallel
