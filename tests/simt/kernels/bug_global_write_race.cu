// Planted bug: every block writes out[0] without an atomic.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void global_race_kernel(int* out, bool buggy) {
  if (threadIdx.x != 0) return;
  if (buggy) {
    out[0] = static_cast<int>(blockIdx.x);
  } else {
    atomicAdd(out, 1);
  }
}

}  // namespace

void run_global_race(int* out, int blocks, bool buggy) {
  global_race_kernel<<<blocks, 32>>>(out, buggy);
}

}  // namespace braid::simt::testing
