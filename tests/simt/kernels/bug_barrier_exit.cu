// Planted bug: a barrier only some threads reach (the others return before it).
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void barrier_exit_kernel(int* out, bool buggy) {
  __shared__ int staged[64];
  const int t = static_cast<int>(threadIdx.x);
  staged[t] = t;
  if (buggy && t >= 32) {
    out[t] = -1;  // these threads skip the barrier and leave
    return;
  }
  __syncthreads();
  out[t] = staged[63 - t];
}

}  // namespace

void run_barrier_exit(int* out, bool buggy) {
  barrier_exit_kernel<<<1, 64>>>(out, buggy);
}

}  // namespace braid::simt::testing
