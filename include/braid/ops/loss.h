// Differentiable fused log-softmax + cross-entropy.
#pragma once

#include "braid/core/tensor.h"

namespace braid {

inline constexpr int64_t kIgnoreIndex = -1;

// logits [..., Vp], targets i32 [...]. Only the first num_classes columns take part (the rest
// is vocabulary padding); num_classes < 0 means all. Returns the mean loss over targets that
// are not ignore_index, as a scalar. A target outside [0, num_classes) is an error.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t num_classes = -1,
                     int64_t ignore_index = kIgnoreIndex);
// The same for logits the caller gives up (a temporary, or std::move): on the CPU, where
// nothing else holds their memory, their gradient is written over them rather than into a
// new buffer of the same size, which also saves the kernel a third of its memory traffic.
Tensor cross_entropy(Tensor&& logits, const Tensor& targets, int64_t num_classes = -1,
                     int64_t ignore_index = kIgnoreIndex);

}  // namespace braid
