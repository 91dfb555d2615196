// What the cross-entropy ops share (ops::cross_entropy and the vocabulary-parallel one): the
// targets' check and count, the mean over the counted rows, and an incoming gradient applied
// where it lives.
#pragma once

#include <cstdint>
#include <string_view>

#include "braid/core/tensor.h"

namespace braid::ops {

// How many of `targets` (dense i32) are not ignore_index, after checking that each of those
// is in [0, num_classes); an error names the op and the first bad target. Device targets are
// not read back when the host recorded their range before copying them (host_checked.h) and
// ignore_index is -1 (the value it counts); otherwise they come over once.
int64_t checked_target_count(const Tensor& targets, int64_t num_classes, int64_t ignore_index,
                             std::string_view op);

// The mean of the per-row losses over `denom` rows, as a scalar on their device. On the host
// summed in double; on a device it stays there (summed in double, one multiply), so the loss
// is read back only when the caller asks.
Tensor mean_loss(const Tensor& losses, float denom);

// d *= g for a device scalar g, in place on d's device: an incoming gradient applied where it
// lives instead of being read back to the host.
void mul_by_device_scalar_(Tensor& d, const Tensor& g);

}  // namespace braid::ops
