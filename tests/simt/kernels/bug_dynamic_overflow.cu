// Planted bug: dynamic shared memory (extern __shared__) indexed past the launched size.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

constexpr int kThreads = 64;

__global__ void dynamic_overflow_kernel(float* out, bool buggy) {
  extern __shared__ float dynamic[];
  const int t = static_cast<int>(threadIdx.x);
  dynamic[buggy ? t + 1 : t] = 1.0f;
  __syncthreads();
  out[t] = dynamic[t];
}

}  // namespace

void run_dynamic_overflow(float* out, bool buggy) {
  dynamic_overflow_kernel<<<1, kThreads, kThreads * sizeof(float)>>>(out, buggy);
}

}  // namespace braid::simt::testing
