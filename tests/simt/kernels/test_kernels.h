// Host entry points of the emulator core's test kernels (tests/simt/kernels/*.cu, translated
// and run by the emulator). Pointers are device memory (braid::simt::device_allocate).
#pragma once

#include <cstdint>

namespace braid::simt::testing {

// ---- primitives.cu: each primitive, correct use ------------------------------------------------
enum class ShuffleKind { idx, up, down, bfly };
// One block of `threads`: out[t] = the shuffle of in[t]; lane L passes arg + 5 * L (idx) or arg.
void run_shuffle(ShuffleKind kind, const int* in, int* out, int arg, int width, int threads);
void run_shuffle_double(const double* in, double* out, int threads);  // __shfl_down_sync, 1
// Lanes in `mask` vote on pred[t]: ballot, any and all per thread (others write nothing).
void run_votes(const int* pred, unsigned* ballot, int* any, int* all, unsigned mask);
// Per thread: __match_any_sync of key[t], __reduce_add_sync and __reduce_max_sync of key[t].
void run_match_reduce(const unsigned* key, unsigned* match, unsigned* sum, unsigned* max,
                      int threads);
// Lanes exchange through shared memory with __syncwarp between the write and the read.
void run_warp_exchange(int* out, int threads, bool syncwarp);
// blocks x threads atomics of every kind into the counters (see primitives.cu for the values).
struct AtomicCounters {
  int* add_int;
  unsigned* add_unsigned;
  unsigned long long* add_ull;
  float* add_float;
  double* add_double;
  int* max_int;
  int* min_int;
  unsigned* inc;
  unsigned* exch;
  float* cas_float;  // increments by compare-and-swap (the programming guide's loop)
};
void run_atomics(const AtomicCounters& c, int blocks, int threads);
// A thread spins on an atomic flag another thread of the block sets: needs atomics to yield.
void run_spin_wait(int* out);
// out[block] = block_sum(in[block * threads + t]) with kernels/device_reduce.cuh.
void run_block_sum(const float* in, float* out, int blocks, int threads);
// out[0..2] = __syncthreads_count / _and / _or of (t % 3 == 0), (t >= 0), (t == 7).
void run_barrier_votes(int* out, int threads);
// order[k] = linear thread index of the k-th thread to pass an atomic counter.
void run_arrival_order(int* order, int* counter, int threads);
// order[k] = index of the k-th block whose thread 0 passes an atomic counter.
void run_block_order(int* order, int* counter, int blocks);
// out[4 * g + 0..3] = x, y, z of threadIdx and lane, for 3-D blocks in a 2-D grid.
void run_thread_indices(unsigned* out, unsigned bx, unsigned by, unsigned bz, unsigned gx,
                        unsigned gy);
// Dynamic shared memory: out[t] = in[threads - 1 - t] through extern __shared__.
void run_dynamic_shared(const float* in, float* out, int threads);
// cp.async of in into shared memory (16-byte copies), wait_all, barrier, out[t] = tile[t] * 2.
void run_async_copy(const float* in, float* out, int threads);
// A kernel that launches with an impossible block size (the launch must not run).
void run_oversized_block(int* out);
// A kernel whose thread 3 throws std::runtime_error / calls __trap().
void run_throwing_kernel(int* out);
void run_trapping_kernel(int* out);
// Three lanes wait at three collectives whose masks chain into a cycle: a deadlock.
void run_collective_cycle();

// ---- planted bugs: each with its correct twin (`buggy` false) -----------------------------------
// Block reduction (device_reduce.cuh's algorithm) called twice, without its first (leading) or
// its second barrier (buggy) or with both.
void run_reduce_without_first_barrier(const float* in, float* out, bool buggy);
void run_reduce_without_second_barrier(const float* in, float* out, bool buggy);
// Threads 32..63 return before the __syncthreads (buggy) or every thread reaches it.
void run_barrier_exit(int* out, bool buggy);
// Both branches of a divergent if have their own __syncthreads (buggy) or one after them.
void run_barrier_two_sites(int* out, bool buggy);
// Tiled copy of n floats whose bound check is `i <= n` (buggy) or `i < n`.
void run_tile_bound(const float* in, float* out, int n, bool buggy);
// Warp sum whose mask leaves out lane 31 (buggy) or is full.
void run_mask_missing_lane(const int* in, int* out, bool buggy);
// Lanes 16..31 return early, lanes 0..15 then shuffle with the full mask (buggy) or 0xffff.
void run_mask_exited_lane(const int* in, int* out, bool buggy);
// Lanes 0..15 shuffle with mask 0xffff reading lane (lane + 8) (buggy: 8..23) or (lane + 8) % 16.
void run_mask_source_outside(const int* in, int* out, bool buggy);
// A shared tile one element short for the block (buggy) or exact.
void run_shared_short(const float* in, float* out, bool buggy);
// Each thread writes s[t] and reads s[t + 1] with (correct) or without (buggy) a barrier.
void run_shared_race(const float* in, float* out, bool buggy);
// A shared write and read of two lanes ordered by a shuffle only: mode 0 read after write, 1
// write after read (both races), 2 ordered by __syncwarp instead (correct).
void run_shuffle_not_fence(int* out, int mode);
// Warp-private exchange without (buggy) or with __syncwarp.
void run_warp_race(int* out, bool buggy);
// Every block writes out[0] (buggy) or atomicAdds it.
void run_global_race(int* out, int blocks, bool buggy);
// Block b reads in[b + 1], which block b + 1 writes in the same launch (buggy), or in[b].
void run_global_read_race(int* data, int blocks, bool buggy);
// Reads a buffer; the test decides whether it was ever written.
void run_read_buffer(const float* in, float* out, int n);
// Reads a shared array that (buggy) no thread wrote.
void run_uninit_shared(float* out, bool buggy);
// cp.async into shared memory, then a barrier without (buggy) or after cp.async.wait_all.
void run_async_missing_wait(const float* in, float* out, bool buggy);
// A float4 load from a float array at an offset of 1 float (buggy) or 0.
void run_misaligned_vector(const float* in, float* out, bool buggy);
// extern __shared__ indexed past the launched dynamic size (buggy) or within it.
void run_dynamic_overflow(float* out, bool buggy);

}  // namespace braid::simt::testing
