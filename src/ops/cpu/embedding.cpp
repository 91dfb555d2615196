// CPU embedding: row gather forward; scatter-add backward split by columns (race-free).
#include <omp.h>

#include <cstring>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {

void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  const int64_t n = ids.numel(), c = weight.size(1);
  const float* w = weight.data<float>();
  const int32_t* id = ids.data<int32_t>();
  float* po = out.data<float>();
#pragma omp parallel for if (n * c > (1 << 15))
  for (int64_t i = 0; i < n; ++i) std::memcpy(po + i * c, w + id[i] * c, c * sizeof(float));
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  const int64_t n = ids.numel(), c = dweight.size(1);
  const int32_t* id = ids.data<int32_t>();
  const float* g = dout.data<float>();
  float* dw = dweight.data<float>();
  // Every thread walks all tokens but owns a column range, so rows that repeat never collide
  // and the summation order per element is fixed (deterministic).
#pragma omp parallel if (n * c > (1 << 15))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t c0 = c * t / nt, c1 = c * (t + 1) / nt;
    for (int64_t i = 0; i < n; ++i) {
      float* dst = dw + id[i] * c;
      const float* src = g + i * c;
      for (int64_t j = c0; j < c1; ++j) dst[j] += src[j];
    }
  }
}

}  // namespace braid::ops::cpu
