// data::Batch: one batch of token ids and their next-token targets, as a step consumes it.
#pragma once

#include "braid/core/tensor.h"

namespace braid::data {

struct Batch {
  Tensor inputs;   // i32 [B, T]
  Tensor targets;  // i32 [B, T], inputs shifted left by one token (-1: not counted in the loss)
};

}  // namespace braid::data
