// Planted bug: cp.async into shared memory and a barrier without waiting for the copies first
// (the consumer reads bytes still in flight), and the correct order.
#include "simt/async_copy.h"
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void async_missing_wait_kernel(const float* in, float* out, bool buggy) {
  __shared__ __align__(16) float tile[128];
  const unsigned t = threadIdx.x;
  if (t % 4 == 0) braid::simt::async_copy_issue(&tile[t], &in[t], 16);
  braid::simt::async_copy_commit();
  if (!buggy) braid::simt::async_copy_wait_all();
  __syncthreads();
  out[t] = tile[(t + 4) % 128];
  if (buggy) braid::simt::async_copy_wait_all();
}

}  // namespace

void run_async_missing_wait(const float* in, float* out, bool buggy) {
  async_missing_wait_kernel<<<1, 128>>>(in, out, buggy);
}

}  // namespace braid::simt::testing
