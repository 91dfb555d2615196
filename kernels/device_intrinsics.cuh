// Device intrinsics for the tensor-core and async-copy kernels: the only file in braid with
// inline PTX. Each intrinsic has its PTX body for nvcc and, under BRAID_SIMT (the emulator
// compiling kernels as host C++), an emulated body that follows the PTX ISA's per-lane layouts.
//
// Every intrinsic needs sm_80 or newer (mma.sync m16n8k16 with .bf16, cp.async); compiling this
// header for an older device architecture stops with an error rather than trapping at run time.
//
// Emulation (see kernels/simt/): the warp-wide instructions (mma.sync, ldmatrix) meet all 32
// lanes in one braid::simt::warp_gather, so a lane that diverged, exited or reached a different
// call is reported as a fault naming the kernel and both call sites; each lane then computes its
// own registers with the element positions of kernels/mma_fragments.h (the PTX ISA's formulas,
// checked against the manual by tests/gpu/test_fragment_layout.cpp). cp.async goes through
// braid::simt::async_copy_*, which keeps the destination in flight until the issuing thread
// waits for its group, so reading it early is a fault. Call sites are passed down (the trailing
// defaulted std::source_location parameter, present only in the emulated build).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "mma_fragments.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "device_intrinsics.cuh needs sm_80 or newer (mma.sync m16n8k16 .bf16, cp.async)"
#endif

#ifdef BRAID_SIMT
#include <cmath>
#include <cstdio>
#include <cstring>
#include <source_location>
#include <string>

#include "simt/async_copy.h"
#include "simt/fault.h"
#include "simt/warp.h"

#define BRAID_INTRINSIC_SITE , const std::source_location& site = std::source_location::current()
#else
#define BRAID_INTRINSIC_SITE
#endif

namespace braid::cuda {

// A .shared state-space address: what ldmatrix and cp.async take. On the device a 32-bit
// offset into the block's shared window (cvta.to.shared); in the emulator, where shared memory
// is ordinary memory, the pointer itself. Byte arithmetic on it means the same in both; keep it
// in a SharedAddress, never a uint32_t, which would truncate the emulator's 64-bit one.
#ifdef BRAID_SIMT
using SharedAddress = uintptr_t;
#else
using SharedAddress = uint32_t;
#endif

// __cvta_generic_to_shared: a generic pointer into shared memory -> its .shared address.
__device__ inline SharedAddress shared_address(const void* generic) {
#ifdef BRAID_SIMT
  return reinterpret_cast<uintptr_t>(generic);
#elif defined(__CUDA_ARCH__)
  return static_cast<SharedAddress>(__cvta_generic_to_shared(generic));
#else
  return 0;  // nvcc's host pass never runs device code
#endif
}

#ifdef BRAID_SIMT
namespace simt_detail {

// A 16-bit load the emulator's checker sees as the kernel's own plain read (may_alias: shared
// tiles are often declared as uint4 or float arrays and read here as 16-bit elements).
using AliasU16 = uint16_t __attribute__((__may_alias__));
inline uint16_t load_b16(uintptr_t address) {
  return *reinterpret_cast<const AliasU16*>(address);
}

inline std::string where(const std::source_location& site) {
  return std::string(site.file_name()) + ":" + std::to_string(site.line());
}

[[noreturn]] inline void misaligned(const char* op, const char* what, const void* address,
                                    unsigned alignment, const std::source_location& site) {
  char text[64];
  std::snprintf(text, sizeof text, "%p", address);
  braid::simt::fault("misaligned address", std::string(op) + ": " + what + " " + text + " is not " +
                                               std::to_string(alignment) + "-byte aligned, at " +
                                               where(site));
}

inline float bf16_to_float(uint16_t bits) {
  return __bfloat162float(__ushort_as_bfloat16(bits));
}
inline float f16_to_float(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

struct MmaOperands {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, for the calling lane.
// The warp's fragments are reassembled into A (16 x 16), B (16 x 8) and C (16 x 8), then the lane
// computes its own four D elements: d = c, then d = fma(a[row][k], b[k][col], d) for k = 0..15.
// Every product of two bf16 or two f16 values is exact in fp32 (8 + 8 and 11 + 11 significant
// bits fit in 24; bf16 products that leave fp32's range overflow or round as fma rounds them),
// so each step is one fp32 rounding of an exact sum. That order is this emulator's choice: the
// hardware's internal accumulation order and precision are not specified by NVIDIA, so the
// emulation checks fragment layouts and data flow, not the tensor core's rounding of the sum;
// tests compare both with a float64 product under the fp32 accumulation bound.
template <float (*Decode)(uint16_t)>
inline void mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, const float* c,
                         const char* op, const std::source_location& site) {
  MmaOperands mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  std::memcpy(mine.c, c, sizeof mine.c);  // before d is written: d may alias c
  const auto warp = braid::simt::warp_gather(0xffffffffu, mine, op, site);
  float tile_a[16][16];
  float tile_b[16][8];
  float tile_c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaOperands& from = warp[lane];
    for (int i = 0; i < 8; ++i) {
      const fragment::RowCol at = fragment::mma_m16n8k16_a(lane, i);
      tile_a[at.row][at.col] = Decode(static_cast<uint16_t>(from.a[i / 2] >> (16 * (i % 2))));
    }
    for (int i = 0; i < 4; ++i) {
      const fragment::RowCol at = fragment::mma_m16n8k16_b(lane, i);
      tile_b[at.row][at.col] = Decode(static_cast<uint16_t>(from.b[i / 2] >> (16 * (i % 2))));
      const fragment::RowCol cat = fragment::mma_m16n8_c(lane, i);
      tile_c[cat.row][cat.col] = from.c[i];
    }
  }
  const int lane = braid::simt::lane_id();
  for (int i = 0; i < 4; ++i) {
    const fragment::RowCol at = fragment::mma_m16n8_c(lane, i);
    float acc = tile_c[at.row][at.col];
    for (int k = 0; k < 16; ++k) acc = std::fma(tile_a[at.row][k], tile_b[k][at.col], acc);
    d[i] = acc;
  }
}

// ldmatrix.sync.aligned.m8n8.x{Count}{.trans}.shared.b16 for the calling lane: the warp's row
// addresses are gathered, then the lane reads its own elements with plain 16-bit loads (so the
// checker sees every element read, by the lane that receives it). Only the addresses of lanes
// 0 .. 8 * Count - 1 are used, as on sm_80+; each must be 16-byte aligned (a row is 16 bytes).
template <int Count, bool Trans>
inline void ldmatrix(uint32_t* r, SharedAddress address, const char* op,
                     const std::source_location& site) {
  const auto rows = braid::simt::warp_gather(0xffffffffu, address, op, site);
  const int lane = braid::simt::lane_id();
  for (int m = 0; m < Count; ++m) {
    uint32_t value = 0;
    for (int j = 0; j < 2; ++j) {
      const fragment::RowCol at = fragment::ldmatrix_m8n8(lane, j, Trans);
      const uintptr_t row = rows[fragment::ldmatrix_address_lane(m, at.row)];
      if (row % 16 != 0) {
        misaligned(op, "row address", reinterpret_cast<const void*>(row), 16, site);
      }
      value |= static_cast<uint32_t>(load_b16(row + 2 * at.col)) << (16 * j);
    }
    r[m] = value;
  }
}

template <int Bytes>
inline void cp_async(SharedAddress dst, const void* src, int src_bytes, const char* op,
                     const std::source_location& site) {
  void* destination = reinterpret_cast<void*>(dst);
  if (dst % Bytes != 0) misaligned(op, "shared destination", destination, Bytes, site);
  if (reinterpret_cast<uintptr_t>(src) % Bytes != 0) {
    misaligned(op, "global source", src, Bytes, site);
  }
  if (src_bytes < 0 || src_bytes > Bytes) {
    braid::simt::fault("invalid cp.async", std::string(op) + ": src-size " +
                                               std::to_string(src_bytes) + " is outside 0.." +
                                               std::to_string(Bytes) + ", at " + where(site));
  }
  // src-size < cp-size: the rest of the destination is zero-filled by the same asynchronous
  // copy, so it stays in flight with the rest (the zeros come from a constant source).
  alignas(16) static const unsigned char kZeros[16] = {};
  if (src_bytes > 0) braid::simt::async_copy_issue(destination, src, src_bytes, site);
  if (src_bytes < Bytes) {
    braid::simt::async_copy_issue(static_cast<unsigned char*>(destination) + src_bytes, kZeros,
                                  Bytes - src_bytes, site);
  }
}

}  // namespace simt_detail
#endif  // BRAID_SIMT

// ---------------------------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: D = A B + C for one warp.
// PTX ISA "Warp Level Matrix Multiply-Accumulate Instructions: mma"; the layouts are those of
// "Matrix Fragments for mma.m16n8k16 with floating point type" (kernels/mma_fragments.h):
// a = 4 registers of two 16-bit A elements (a0..a7), b = 2 registers (b0..b3), c and d = 4 fp32.
// Every lane of the warp must execute the same call (.sync.aligned). d may alias c.

__device__ inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2],
                                         const float (&c)[4] BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  simt_detail::mma_m16n8k16<simt_detail::bf16_to_float>(
      d, a, b, c, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", site);
#elif defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#endif
}

__device__ inline void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2],
                                        const float (&c)[4] BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  simt_detail::mma_m16n8k16<simt_detail::f16_to_float>(
      d, a, b, c, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", site);
#elif defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#endif
}

// ---------------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16: PTX ISA "Warp-level matrix load
// instruction: ldmatrix". Each lane passes one row address (lane 8 m + r: row r of matrix m;
// lanes past 8 x count are ignored but should pass valid addresses); register m of each lane
// receives its part of matrix m (kernels/mma_fragments.h, ldmatrix_m8n8). Rows are 16 bytes,
// 16-byte aligned, anywhere in shared memory. The whole warp must execute the same call.
// Shared memory written by other threads must be ordered before the call by a barrier
// (__syncthreads, or __syncwarp within the warp), as for any shared read.

#ifdef BRAID_SIMT
#define BRAID_LDMATRIX(count, trans, name)                                                      \
  simt_detail::ldmatrix<count, trans>(r, row, "ldmatrix.sync.aligned.m8n8." name ".shared.b16", \
                                      site)
#endif

__device__ inline void ldmatrix_x1(uint32_t (&r)[1], SharedAddress row BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  BRAID_LDMATRIX(1, false, "x1");
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(row));
#endif
}

__device__ inline void ldmatrix_x2(uint32_t (&r)[2], SharedAddress row BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  BRAID_LDMATRIX(2, false, "x2");
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(row));
#endif
}

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], SharedAddress row BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  BRAID_LDMATRIX(4, false, "x4");
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
#endif
}

__device__ inline void ldmatrix_x1_trans(uint32_t (&r)[1], SharedAddress row BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  BRAID_LDMATRIX(1, true, "x1.trans");
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(row));
#endif
}

__device__ inline void ldmatrix_x2_trans(uint32_t (&r)[2], SharedAddress row BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  BRAID_LDMATRIX(2, true, "x2.trans");
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(row));
#endif
}

__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], SharedAddress row BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  BRAID_LDMATRIX(4, true, "x4.trans");
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
#endif
}

#ifdef BRAID_SIMT
#undef BRAID_LDMATRIX
#endif

// ---------------------------------------------------------------------------------------------
// cp.async.{ca,cg}.shared.global: PTX ISA "Data Movement and Conversion Instructions: cp.async".
// Starts a copy of Bytes (4, 8 or 16; .cg only 16) from global `src` to shared `dst`, both
// aligned to Bytes. The copy completes only through cp_async_commit + cp_async_wait<N> (or
// cp_async_wait_all) in the issuing thread, and is visible to other threads only after a barrier
// that follows that wait. The "memory" clobbers keep the compiler from moving ordinary shared
// accesses across the copy and the waits.

template <int Bytes>
__device__ inline void cp_async_ca(SharedAddress dst, const void* src BRAID_INTRINSIC_SITE) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
#ifdef BRAID_SIMT
  simt_detail::cp_async<Bytes>(dst, src, Bytes, "cp.async.ca.shared.global", site);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst),
               "l"(__cvta_generic_to_global(src)), "n"(Bytes)
               : "memory");
#endif
}

__device__ inline void cp_async_cg16(SharedAddress dst, const void* src BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  simt_detail::cp_async<16>(dst, src, 16, "cp.async.cg.shared.global", site);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
               "l"(__cvta_generic_to_global(src))
               : "memory");
#endif
}

// The src-size form: copies the first `src_bytes` (0..16) bytes of `src` and zero-fills the rest
// of the 16-byte destination, for tiles that end inside the chunk (src_bytes = 0 reads nothing,
// but `src` must still be a valid, aligned global address).
__device__ inline void cp_async_cg16_zfill(SharedAddress dst, const void* src,
                                           int src_bytes BRAID_INTRINSIC_SITE) {
#ifdef BRAID_SIMT
  simt_detail::cp_async<16>(dst, src, src_bytes, "cp.async.cg.shared.global (src-size)", site);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(__cvta_generic_to_global(src)), "r"(src_bytes)
               : "memory");
#endif
}

// cp.async.commit_group: the thread's copies issued since the last commit form one group.
__device__ inline void cp_async_commit() {
#ifdef BRAID_SIMT
  braid::simt::async_copy_commit();
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// cp.async.wait_group N: waits until at most the N most recent committed groups are pending.
template <int N>
__device__ inline void cp_async_wait() {
  static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes a small immediate");
#ifdef BRAID_SIMT
  braid::simt::async_copy_wait(N);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// cp.async.wait_all: every copy of the thread, committed or not, has completed.
__device__ inline void cp_async_wait_all() {
#ifdef BRAID_SIMT
  braid::simt::async_copy_wait_all();
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------------------------
// Packing fp32 pairs into the 16-bit pairs mma and ldmatrix move. `lo` goes to bits 0-15 (the
// lower-indexed element of a fragment register, and the lower address in memory), `hi` to bits
// 16-31. Round to nearest even, NaN to a NaN. PTX ISA "cvt": cvt.rn.{bf16x2,f16x2}.f32 d, a, b
// puts a in the upper half, so `hi` is passed first.

__device__ inline uint32_t pack_bf16x2(float lo, float hi) {
#ifdef BRAID_SIMT
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
#elif defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return 0;
#endif
}

__device__ inline uint32_t pack_f16x2(float lo, float hi) {
#ifdef BRAID_SIMT
  return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
         (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16);
#elif defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return 0;
#endif
}

// The exact inverses (every bf16 and f16 value is a float): no PTX needed.
__device__ inline float bf16x2_lo(uint32_t v) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(v & 0xffffu)));
}
__device__ inline float bf16x2_hi(uint32_t v) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(v >> 16)));
}
__device__ inline float f16x2_lo(uint32_t v) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xffffu)));
}
__device__ inline float f16x2_hi(uint32_t v) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16)));
}

// Two 16 x 8 fp32 accumulator tiles (columns 0-7 and 8-15) as the A operand of the next mma
// (attention's P V): the accumulator layout of adjacent tiles is A's layout, register for
// register (kernels/mma_fragments.h, a_register_source_*), so this is packing only.
__device__ inline void accumulators_to_a_bf16(uint32_t (&a)[4], const float (&left)[4],
                                              const float (&right)[4]) {
  a[0] = pack_bf16x2(left[0], left[1]);
  a[1] = pack_bf16x2(left[2], left[3]);
  a[2] = pack_bf16x2(right[0], right[1]);
  a[3] = pack_bf16x2(right[2], right[3]);
}
__device__ inline void accumulators_to_a_f16(uint32_t (&a)[4], const float (&left)[4],
                                             const float (&right)[4]) {
  a[0] = pack_f16x2(left[0], left[1]);
  a[1] = pack_f16x2(left[2], left[3]);
  a[2] = pack_f16x2(right[0], right[1]);
  a[3] = pack_f16x2(right[2], right[3]);
}

}  // namespace braid::cuda

#undef BRAID_INTRINSIC_SITE
