// Planted bug: a shared tile one element short for the block.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

constexpr int kThreads = 64;

template <int kTileSize>
__global__ void shared_tile_kernel(const float* in, float* out) {
  __shared__ float tile[kTileSize];
  const int t = static_cast<int>(threadIdx.x);
  tile[t] = in[t];
  __syncthreads();
  out[t] = tile[kThreads - 1 - t];
}

}  // namespace

void run_shared_short(const float* in, float* out, bool buggy) {
  if (buggy) {
    shared_tile_kernel<kThreads - 1><<<1, kThreads>>>(in, out);
  } else {
    shared_tile_kernel<kThreads><<<1, kThreads>>>(in, out);
  }
}

}  // namespace braid::simt::testing
