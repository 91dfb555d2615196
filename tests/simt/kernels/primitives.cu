// Test kernels that use each emulated primitive correctly (test_warp.cpp, test_atomics.cpp,
// test_scheduler.cpp compare their results with references).
#include <stdexcept>

#include "device_reduce.cuh"
#include "simt/async_copy.h"
#include "simt/warp.h"
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

constexpr unsigned kFull = 0xffffffffu;

__global__ void shuffle_kernel(const int* in, int* out, int kind, int arg, int width) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  const int v = in[t];
  int r = 0;
  switch (kind) {
    case 0:
      r = __shfl_sync(kFull, v, arg + 5 * lane, width);
      break;
    case 1:
      r = __shfl_up_sync(kFull, v, static_cast<unsigned>(arg), width);
      break;
    case 2:
      r = __shfl_down_sync(kFull, v, static_cast<unsigned>(arg), width);
      break;
    default:
      r = __shfl_xor_sync(kFull, v, arg, width);
      break;
  }
  out[t] = r;
}

__global__ void shuffle_double_kernel(const double* in, double* out) {
  out[threadIdx.x] = __shfl_down_sync(kFull, in[threadIdx.x], 1u);
}

__global__ void votes_kernel(const int* pred, unsigned* ballot, int* any, int* all, unsigned mask) {
  const unsigned t = threadIdx.x;
  if (!(mask >> t & 1u)) return;
  ballot[t] = __ballot_sync(mask, pred[t]);
  any[t] = __any_sync(mask, pred[t]);
  all[t] = __all_sync(mask, pred[t]);
}

__global__ void match_reduce_kernel(const unsigned* key, unsigned* match, unsigned* sum,
                                    unsigned* max) {
  const unsigned t = threadIdx.x;
  match[t] = __match_any_sync(kFull, key[t]);
  sum[t] = __reduce_add_sync(kFull, key[t]);
  max[t] = __reduce_max_sync(kFull, key[t]);
}

__global__ void warp_exchange_kernel(int* out, bool syncwarp) {
  __shared__ int slots[8][32];
  const int t = static_cast<int>(threadIdx.x), warp = t / 32, lane = t % 32;
  slots[warp][lane] = t * 10;
  if (syncwarp) __syncwarp();
  out[t] = slots[warp][(lane + 1) % 32];
}

__global__ void atomics_kernel(AtomicCounters c) {
  const int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(c.add_int, 3);
  atomicAdd(c.add_unsigned, 2u);
  atomicAdd(c.add_ull, 1ull << 33);
  atomicAdd(c.add_float, 1.0f);
  atomicAdd(c.add_double, 0.5);
  atomicMax(c.max_int, g);
  atomicMin(c.min_int, -g);
  atomicInc(c.inc, 99u);
  atomicExch(c.exch, static_cast<unsigned>(g));
  // The programming guide's compare-and-swap loop (its double atomicAdd, here on a float).
  auto* bits = reinterpret_cast<unsigned*>(c.cas_float);
  unsigned old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed, __float_as_uint(__uint_as_float(assumed) + 1.0f));
  } while (assumed != old);
}

__global__ void spin_wait_kernel(int* out) {
  __shared__ int flag;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    while (atomicAdd(&flag, 0) == 0) {
    }
    out[0] = 1;
  } else if (threadIdx.x == 1) {
    atomicExch(&flag, 1);
  }
}

__global__ void block_sum_kernel(const float* in, float* out) {
  const float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  const float total = braid::cuda::block_sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

__global__ void barrier_votes_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int count = __syncthreads_count(t % 3 == 0);
  const int all = __syncthreads_and(t >= 0);
  const int any = __syncthreads_or(t == 7);
  if (t == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
  }
}

__global__ void arrival_order_kernel(int* order, int* counter) {
  const int linear = static_cast<int>(threadIdx.x + blockDim.x * threadIdx.y);
  order[atomicAdd(counter, 1)] = linear;
}

__global__ void block_order_kernel(int* order, int* counter) {
  if (threadIdx.x == 0) order[atomicAdd(counter, 1)] = static_cast<int>(blockIdx.x);
}

__global__ void thread_indices_kernel(unsigned* out) {
  const unsigned in_block = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned block = blockIdx.x + gridDim.x * blockIdx.y;
  const unsigned g = block * blockDim.x * blockDim.y * blockDim.z + in_block;
  out[4 * g + 0] = threadIdx.x;
  out[4 * g + 1] = threadIdx.y;
  out[4 * g + 2] = threadIdx.z;
  out[4 * g + 3] = static_cast<unsigned>(lane_id());
}

__global__ void dynamic_shared_kernel(const float* in, float* out) {
  extern __shared__ float staged[];
  const unsigned t = threadIdx.x, n = blockDim.x;
  staged[t] = in[t];
  __syncthreads();
  out[t] = staged[n - 1 - t];
}

__global__ void async_copy_kernel(const float* in, float* out) {
  __shared__ __align__(16) float tile[256];
  const unsigned t = threadIdx.x;
  if (t % 4 == 0) braid::simt::async_copy_issue(&tile[t], &in[t], 16);
  braid::simt::async_copy_commit();
  braid::simt::async_copy_wait(0);
  __syncthreads();
  out[t] = tile[t] * 2.0f;
}

__global__ void tiny_kernel(int* out) {
  out[threadIdx.x] = 1;
}

void thrower() {
  throw std::runtime_error("kernel-side failure");
}

__global__ void throwing_kernel(int* out) {
  if (threadIdx.x == 3) thrower();
  out[threadIdx.x] = 1;
}

__global__ void trapping_kernel(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

__global__ void collective_cycle_kernel() {
  const unsigned lane = threadIdx.x;
  if (lane == 0) __shfl_sync(0x3u, 0, 0);
  if (lane == 1) __shfl_sync(0x6u, 0, 1);
  if (lane == 2) __shfl_sync(0x5u, 0, 2);
}

}  // namespace

void run_shuffle(ShuffleKind kind, const int* in, int* out, int arg, int width, int threads) {
  shuffle_kernel<<<1, threads>>>(in, out, static_cast<int>(kind), arg, width);
}
void run_shuffle_double(const double* in, double* out, int threads) {
  shuffle_double_kernel<<<1, threads>>>(in, out);
}
void run_votes(const int* pred, unsigned* ballot, int* any, int* all, unsigned mask) {
  votes_kernel<<<1, 32>>>(pred, ballot, any, all, mask);
}
void run_match_reduce(const unsigned* key, unsigned* match, unsigned* sum, unsigned* max,
                      int threads) {
  match_reduce_kernel<<<1, threads>>>(key, match, sum, max);
}
void run_warp_exchange(int* out, int threads, bool syncwarp) {
  warp_exchange_kernel<<<1, threads>>>(out, syncwarp);
}
void run_atomics(const AtomicCounters& c, int blocks, int threads) {
  atomics_kernel<<<blocks, threads>>>(c);
}
void run_spin_wait(int* out) {
  spin_wait_kernel<<<1, 64>>>(out);
}
void run_block_sum(const float* in, float* out, int blocks, int threads) {
  block_sum_kernel<<<blocks, threads>>>(in, out);
}
void run_barrier_votes(int* out, int threads) {
  barrier_votes_kernel<<<1, threads>>>(out);
}
void run_arrival_order(int* order, int* counter, int threads) {
  arrival_order_kernel<<<1, dim3(static_cast<unsigned>(threads) / 2, 2)>>>(order, counter);
}
void run_block_order(int* order, int* counter, int blocks) {
  block_order_kernel<<<blocks, 32>>>(order, counter);
}
void run_thread_indices(unsigned* out, unsigned bx, unsigned by, unsigned bz, unsigned gx,
                        unsigned gy) {
  thread_indices_kernel<<<dim3(gx, gy), dim3(bx, by, bz)>>>(out);
}
void run_dynamic_shared(const float* in, float* out, int threads) {
  dynamic_shared_kernel<<<1, threads, sizeof(float) * static_cast<size_t>(threads)>>>(in, out);
}
void run_async_copy(const float* in, float* out, int threads) {
  async_copy_kernel<<<1, threads>>>(in, out);
}
void run_oversized_block(int* out) {
  tiny_kernel<<<1, 2048>>>(out);
}
void run_throwing_kernel(int* out) {
  throwing_kernel<<<1, 8>>>(out);
}
void run_trapping_kernel(int* out) {
  trapping_kernel<<<1, 8>>>(out);
}
void run_collective_cycle() {
  collective_cycle_kernel<<<1, 3>>>();
}

}  // namespace braid::simt::testing
