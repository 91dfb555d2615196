// Layout-independent parameter initialisation.
//
// Each value depends only on (seed, parameter name, global element index), so a tensor- or
// pipeline-parallel shard fills exactly its slice of the single-process weights without
// ever materialising the whole tensor.
#pragma once

#include <string_view>

#include "braid/core/tensor.h"

namespace braid::nn::init {

// Where a local tensor sits inside its global (unsharded) parameter.
struct GlobalSlice {
  Shape global_shape;  // empty: the tensor is the whole parameter
  Shape offsets;       // start of the local block in each global dim (empty: zeros)
};

void normal_(Tensor& t, uint64_t seed, std::string_view name, float std,
             const GlobalSlice& slice = {});
void constant_(Tensor& t, float value);

}  // namespace braid::nn::init
