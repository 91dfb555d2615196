// Planted bug: block b reads the element block b + 1 overwrites in the same launch.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

__global__ void global_read_race_kernel(int* data, int blocks, bool buggy) {
  const int b = static_cast<int>(blockIdx.x);
  if (threadIdx.x != 0) return;
  const int source = buggy ? (b + 1) % blocks : b;
  const int v = data[source];
  data[b] = v + 1;
}

}  // namespace

void run_global_read_race(int* data, int blocks, bool buggy) {
  global_read_race_kernel<<<blocks, 32>>>(data, blocks, buggy);
}

}  // namespace braid::simt::testing
