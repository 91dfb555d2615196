// Warp and block reductions for the CUDA kernels (device code; include from .cu files only).
//
// Deterministic by construction: the combining order depends only on blockDim, never on timing,
// and the xor butterfly leaves the identical result in every lane (a + b == b + a exactly).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace braid::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Every lane of the (full) warp receives the reduction of all 32 lanes' values.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T value, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value = op(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

template <class T>
__device__ __forceinline__ T warp_sum(T value) {
  return warp_reduce(value, SumOp{});
}

__device__ __forceinline__ float warp_max(float value) {
  return warp_reduce(value, MaxOp{});
}

// Every thread of the block receives the reduction of all threads' values. All threads must
// call it (it synchronises); blockDim.x must be a multiple of 32. Safe to call repeatedly in
// one kernel: the leading barrier keeps a new call from overwriting partials still being read.
template <class T, class Op>
__device__ T block_reduce(T value, Op op, T identity) {
  __shared__ T partials[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  value = warp_reduce(value, op);
  __syncthreads();
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / 32;
  value = lane < warps ? partials[lane] : identity;
  return warp_reduce(value, op);
}

template <class T>
__device__ T block_sum(T value) {
  return block_reduce(value, SumOp{}, T(0));
}

__device__ inline float block_max(float value) {
  return block_reduce(value, MaxOp{}, -INFINITY);
}

}  // namespace braid::cuda
