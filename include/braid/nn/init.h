// Layout-independent parameter initialisation.
//
// Each value depends only on (seed, parameter name, global element index), so a tensor- or
// pipeline-parallel shard fills exactly its slice of the single-process weights without
// ever materialising the whole tensor.
#pragma once

#include <optional>
#include <string_view>

#include "braid/core/tensor.h"
#include "braid/nn/shard_spec.h"

namespace braid::nn::init {

// `shard` says where t sits in the parameter `name`; none: t is the whole parameter.
void normal_(Tensor& t, uint64_t seed, std::string_view name, float std,
             const std::optional<ShardSpec>& shard = std::nullopt);
void constant_(Tensor& t, float value);

}  // namespace braid::nn::init
