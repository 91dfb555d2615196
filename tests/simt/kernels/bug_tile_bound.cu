// Planted bug: a tile bound off by one (i <= n), reading and writing one element past the end.
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

constexpr int kTile = 32;

__global__ void tile_copy_kernel(const float* in, float* out, int n, bool buggy) {
  const int i = static_cast<int>(blockIdx.x) * kTile + static_cast<int>(threadIdx.x);
  if (buggy ? i <= n : i < n) out[i] = in[i] + 1.0f;
}

}  // namespace

void run_tile_bound(const float* in, float* out, int n, bool buggy) {
  tile_copy_kernel<<<(n + kTile - 1) / kTile, kTile>>>(in, out, n, buggy);
}

}  // namespace braid::simt::testing
