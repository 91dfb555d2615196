// Planted bug: each branch of a divergent if has its own __syncthreads (two call sites).
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void barrier_two_sites_kernel(int* out, bool buggy) {
  const int t = static_cast<int>(threadIdx.x);
  if (buggy) {
    if (t % 2 == 0) {
      out[t] = 1;
      __syncthreads();
    } else {
      out[t] = 2;
      __syncthreads();
    }
  } else {
    out[t] = t % 2 == 0 ? 1 : 2;
    __syncthreads();
  }
}

}  // namespace

void run_barrier_two_sites(int* out, bool buggy) {
  barrier_two_sites_kernel<<<1, 64>>>(out, buggy);
}

}  // namespace braid::simt::testing
