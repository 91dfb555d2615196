// Parameter initialisation keyed by (seed, name, global index).
#include "braid/nn/init.h"

#include "braid/core/generator.h"

namespace braid::nn::init {

void normal_(Tensor& t, uint64_t seed, std::string_view name, float std,
             const std::optional<ShardSpec>& shard) {
  BRAID_CHECK(t.dtype() == DType::f32 && t.is_contiguous(),
              "normal_ initialises dense f32 tensors, got {}", t.str());
  const ShardSpec spec = shard ? *shard : ShardSpec::whole(t.shape());
  BRAID_CHECK(spec.local_numel() == t.numel(), "shard {} of '{}' does not describe {}", spec.str(),
              name, t.str());
  if (!t.device().is_cpu()) {
    // Drawn on the host (the values are a function of the global index, not of the device),
    // then copied over once.
    Tensor host = Tensor::empty(t.shape());
    normal_(host, seed, name, std, spec);
    t.copy_(host);
    return;
  }
  const uint64_t stream = stable_hash(name);
  float* p = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    p[i] = std * normal_at(seed, stream, static_cast<uint64_t>(spec.global_index(i)));
}

void constant_(Tensor& t, float value) {
  t.fill_(value);
}

}  // namespace braid::nn::init
