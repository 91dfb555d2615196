// What the host already established about a device tensor of token ids or targets before it
// copied them there (the Trainer checks every batch on the host): their range and how many are
// -1. Ops on a device consult it instead of reading the values back, which would wait for the
// device: embedding and cross_entropy check ids and targets with it, and cross_entropy counts
// the targets it averages over from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "braid/core/tensor.h"

namespace braid::ops {

struct HostCheckedIds {
  int32_t min = 0, max = -1;  // over the values that are not -1 (max < min: there are none)
  int64_t minus_ones = 0;     // values equal to -1 (ignored targets)
};

// The facts of `values` (a dense host i32 tensor), computed on the host.
HostCheckedIds host_check(const Tensor& values);
// Records `facts` for `t`'s elements (a dense device tensor), for as long as its storage lives.
void mark_host_checked(const Tensor& t, const HostCheckedIds& facts);
// The facts recorded for exactly `t`'s elements (same storage, offset and size), if any.
std::optional<HostCheckedIds> host_checked(const Tensor& t);

// Checks that each of `ids` (dense i32) is in [0, limit); an error names the first id outside
// "the `what` [0, limit)". Device ids are checked from what the host recorded, else read back
// once. Returns the host copy that was read (`ids` itself on the host), or an undefined tensor
// where the recorded range sufficed.
Tensor check_ids_in_range(const Tensor& ids, int64_t limit, std::string_view what);

}  // namespace braid::ops
