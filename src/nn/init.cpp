// Parameter initialisation keyed by (seed, name, global index).
#include "braid/nn/init.h"

#include "braid/core/generator.h"

namespace braid::nn::init {

void normal_(Tensor& t, uint64_t seed, std::string_view name, float std, const GlobalSlice& slice) {
  BRAID_CHECK(t.dtype() == DType::f32 && t.is_contiguous(),
              "normal_ initialises dense f32 tensors, got {}", t.str());
  const Shape global = slice.global_shape.empty() ? t.shape() : slice.global_shape;
  const Shape offsets = slice.offsets.empty() ? Shape(t.dim(), 0) : slice.offsets;
  BRAID_CHECK(global.size() == t.shape().size() && offsets.size() == t.shape().size(),
              "slice of {} described with global shape {} and offsets {}", t.str(),
              shape_str(global), shape_str(offsets));
  const Shape global_strides = contiguous_strides(global);
  const uint64_t stream = stable_hash(name);
  float* p = t.data<float>();
  const int64_t n = t.numel();
  const Shape& local = t.shape();
#pragma omp parallel for if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    // Map the local flat index to the global flat index through the slice offsets.
    int64_t rem = i, global_index = 0;
    for (int d = static_cast<int>(local.size()) - 1; d >= 0; --d) {
      const int64_t idx = rem % local[d];
      rem /= local[d];
      global_index += (idx + offsets[d]) * global_strides[d];
    }
    p[i] = std * normal_at(seed, stream, static_cast<uint64_t>(global_index));
  }
}

void constant_(Tensor& t, float value) {
  t.fill_(value);
}

}  // namespace braid::nn::init
