// kernels/device_reduce.cuh's block reduction with each of its two barriers optional, for the
// planted-bug tests (a header with __shared__: the translator must translate it too).
#pragma once

namespace braid::simt::testing {

template <bool kLeadingBarrier, bool kPublishBarrier>
__device__ float block_sum_variant(float value) {
  __shared__ float partials[32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  // Keeps a second call from overwriting partials the first is still reading.
  if (kLeadingBarrier) __syncthreads();
  if (lane == 0) partials[warp] = value;
  // Publishes the partials before anyone reads them.
  if (kPublishBarrier) __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / 32;
  value = lane < warps ? partials[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

}  // namespace braid::simt::testing
