// Shared by the emulated-device strategy tests: a synthetic token batch and a model's values
// copied to the host for comparison.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "braid/data/batch.h"
#include "braid/nn/module.h"

namespace braid::dist::testing {

// Parameter (or gradient) values by name, on the host.
using Values = std::map<std::string, std::vector<float>>;

// Rows [first, first + count) of a global batch of `seq`-token sequences over a vocabulary of
// 61 and their next-token targets; step s shifts the tokens so the steps differ.
inline data::Batch token_batch(int64_t first, int64_t count, int64_t seq, int step) {
  std::vector<int32_t> ids, targets;
  for (int64_t b = first; b < first + count; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      ids.push_back(static_cast<int32_t>((7 * b + 3 * t + 5 * step) % 61));
      targets.push_back(static_cast<int32_t>((7 * b + 3 * (t + 1) + 5 * step) % 61));
    }
  return {Tensor::from_vector(ids, {count, seq}), Tensor::from_vector(targets, {count, seq})};
}

// Every parameter of `model` (or its gradient, with `grads`) copied to the host.
inline Values read_values(const nn::Module& model, bool grads) {
  Values out;
  for (const auto& [name, p] : model.named_parameters())
    out[name] = (grads ? p.grad() : p).to(Device::cpu()).contiguous().to_vector();
  return out;
}

}  // namespace braid::dist::testing
