// Planted bug (the test decides): a kernel reading a device buffer that may never have been
// written.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void read_buffer_kernel(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * 2.0f;
}

}  // namespace

void run_read_buffer(const float* in, float* out, int n) {
  read_buffer_kernel<<<(n + 63) / 64, 64>>>(in, out, n);
}

}  // namespace braid::simt::testing
