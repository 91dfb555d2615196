// Planted bug: a float4 load from a float array at an offset of one float (not 16-byte aligned).
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void misaligned_vector_kernel(const float* in, float* out, bool buggy) {
  const float4 v = *reinterpret_cast<const float4*>(in + (buggy ? 1 : 0) + 4 * threadIdx.x);
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

}  // namespace

void run_misaligned_vector(const float* in, float* out, bool buggy) {
  misaligned_vector_kernel<<<1, 8>>>(in, out, buggy);
}

}  // namespace braid::simt::testing
