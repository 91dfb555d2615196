// CUDA fused log-softmax + cross-entropy over the unpadded vocabulary columns.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// Per row n of logits [N, Vp]: lse[n] = log-sum-exp of logits[n, :num_classes] and
// losses[n] = lse[n] - logits[n, target[n]], or 0 when target[n] == ignore_index. Columns
// >= num_classes are padding and take no part. The op layer checks targets on the host; a
// target outside [0, num_classes) that reaches the kernel anyway gives a NaN loss (never an
// out-of-bounds read). One block per row.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                           int64_t ignore_index, Tensor& losses, Tensor& lse);
// dlogits[n, :] = scale * (softmax(logits[n, :num_classes]) - onehot(target[n])) from the saved
// lse; zero on padding columns and on ignored rows (and on rows with an invalid target).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            int64_t num_classes, int64_t ignore_index, float scale,
                            Tensor& dlogits);

}  // namespace braid::cuda
