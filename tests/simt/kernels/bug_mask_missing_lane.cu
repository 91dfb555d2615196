// Planted bug: a warp sum whose shuffle mask leaves out a lane that calls it (lane 31).
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void mask_missing_lane_kernel(const int* in, int* out, bool buggy) {
  const unsigned mask = buggy ? 0x7fffffffu : 0xffffffffu;
  int v = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  out[threadIdx.x] = v;
}

}  // namespace

void run_mask_missing_lane(const int* in, int* out, bool buggy) {
  mask_missing_lane_kernel<<<1, 32>>>(in, out, buggy);
}

}  // namespace braid::simt::testing
