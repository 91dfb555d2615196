// Planted bug: lanes 16..31 return, then lanes 0..15 shuffle with the full mask.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void mask_exited_lane_kernel(const int* in, int* out, bool buggy) {
  const unsigned lane = threadIdx.x;
  if (lane >= 16) return;
  const unsigned mask = buggy ? 0xffffffffu : 0x0000ffffu;
  int v = in[lane];
  for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  out[lane] = v;
}

}  // namespace

void run_mask_exited_lane(const int* in, int* out, bool buggy) {
  mask_exited_lane_kernel<<<1, 32>>>(in, out, buggy);
}

}  // namespace braid::simt::testing
