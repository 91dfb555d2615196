// Planted bug: a warp-private exchange through shared memory without __syncwarp between the
// write and the read (independent thread scheduling: no lockstep).
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void warp_race_kernel(int* out, bool buggy) {
  __shared__ int slots[2][32];
  const int t = static_cast<int>(threadIdx.x), warp = t / 32, lane = t % 32;
  slots[warp][lane] = t;
  if (!buggy) __syncwarp();
  out[t] = slots[warp][31 - lane];
}

}  // namespace

void run_warp_race(int* out, bool buggy) {
  warp_race_kernel<<<1, 64>>>(out, buggy);
}

}  // namespace braid::simt::testing
