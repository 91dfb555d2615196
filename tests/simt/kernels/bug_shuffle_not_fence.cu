// Planted bugs: a shuffle orders lanes in time but not their memory. A shared write handed to
// another lane by a shuffle alone races (read after write), and so does a read that another lane
// overwrites after a shuffle (write after read); __syncwarp orders both (the correct twin).
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void shuffle_not_fence_kernel(int* out, int mode) {
  __shared__ int slot[32];
  const int lane = static_cast<int>(threadIdx.x);
  slot[lane] = lane;
  __syncthreads();
  const auto meet = [&] {
    if (mode == 2)
      __syncwarp();
    else
      __shfl_sync(0xffffffffu, 0, 0);
  };
  // Read after write: lane 0 writes before the meeting, lane 1 reads after it.
  if (lane == 0 && mode != 1) slot[0] = 100;
  int seen = 0;
  if (lane == 1 && mode == 1) seen = slot[0];  // write after read: lane 1 reads first
  meet();
  if (lane == 1 && mode != 1) seen = slot[0];
  if (lane == 0 && mode == 1) slot[0] = 200;
  if (lane == 1) out[0] = seen;
}

}  // namespace

void run_shuffle_not_fence(int* out, int mode) {
  shuffle_not_fence_kernel<<<1, 32>>>(out, mode);
}

}  // namespace braid::simt::testing
