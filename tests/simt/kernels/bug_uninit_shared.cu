// Planted bug: threads read a shared array no thread wrote.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

constexpr int kThreads = 64;

__global__ void uninit_shared_kernel(float* out, bool buggy) {
  __shared__ float s[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  if (!buggy) s[t] = static_cast<float>(t);
  __syncthreads();
  out[t] = s[t];
}

}  // namespace

void run_uninit_shared(float* out, bool buggy) {
  uninit_shared_kernel<<<1, kThreads>>>(out, buggy);
}

}  // namespace braid::simt::testing
