// Planted bug: each thread writes s[t] and reads its neighbour's s[t + 1] with no barrier between.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

constexpr int kThreads = 64;

__global__ void shared_race_kernel(const float* in, float* out, bool buggy) {
  __shared__ float s[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  s[t] = in[t];
  if (!buggy) __syncthreads();
  out[t] = s[(t + 1) % kThreads];
}

}  // namespace

void run_shared_race(const float* in, float* out, bool buggy) {
  shared_race_kernel<<<1, kThreads>>>(in, out, buggy);
}

}  // namespace braid::simt::testing
