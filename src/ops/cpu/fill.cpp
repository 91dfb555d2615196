// CPU fill kernel: streamed stores for large dense f32 buffers, a broadcast copy otherwise.
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {
namespace {

// Writes `value` to p[0, n) with non-temporal stores, which go to memory without first reading
// each cache line (an ordinary store loads the line before overwriting it).
void stream_fill(float* p, int64_t n, float value) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i < n && reinterpret_cast<uintptr_t>(p + i) % 16 != 0; ++i) p[i] = value;
  const __m128 v = _mm_set1_ps(value);
  for (; i + 4 <= n; i += 4) _mm_stream_ps(p + i, v);
  _mm_sfence();  // streamed stores are weakly ordered: publish them before the thread moves on
#endif
  for (; i < n; ++i) p[i] = value;
}

// Dense f32 fill. Buffers past the caches are streamed: zero_grad of a 124M-parameter model
// writes 497 MB, and non-temporal stores skip reading each line into the cache before writing
// it, about halving the time ordinary stores take.
void fill_dense_f32(float* p, int64_t n, float value) {
  constexpr int64_t kStreamFrom = (8 << 20) / sizeof(float);
  if (n < kStreamFrom) {
#pragma omp parallel for if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] = value;
    return;
  }
  constexpr int64_t kBlock = 1 << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b)
    stream_fill(p + b * kBlock, std::min(kBlock, n - b * kBlock), value);
}

}  // namespace

void fill(float value, Tensor& out) {
  if (out.is_contiguous() && out.dtype() == DType::f32) {
    fill_dense_f32(out.data<float>(), out.numel(), value);
    return;
  }
  Tensor one = Tensor::empty({}, out.dtype());
  store_from_float(one.data_ptr(), 0, out.dtype(), value);
  // Broadcast the scalar over every element through a zero-stride view.
  copy(one.alias(out.shape(), Shape(out.dim(), 0), 0), out);
}

}  // namespace braid::ops::cpu
