// Planted bug: lanes 0..15 shuffle with mask 0xffff but read lanes 8..23, half outside the mask.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void mask_source_outside_kernel(const int* in, int* out, bool buggy) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane >= 16) return;
  const int source = buggy ? lane + 8 : (lane + 8) % 16;
  out[lane] = __shfl_sync(0x0000ffffu, in[lane], source);
}

}  // namespace

void run_mask_source_outside(const int* in, int* out, bool buggy) {
  mask_source_outside_kernel<<<1, 32>>>(in, out, buggy);
}

}  // namespace braid::simt::testing
