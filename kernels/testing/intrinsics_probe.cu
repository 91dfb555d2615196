// Test kernels for kernels/device_intrinsics.cuh: a tiled GEMM through cp.async, ldmatrix and
// mma.sync, raw ldmatrix fragments, cp.async copies and packing, plus planted bugs for the
// emulator. Built for the GPU test binary by nvcc and, under BRAID_SIMT, by the emulator.
#include "testing/intrinsics_probe.cuh"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "braid/core/error.h"
#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_intrinsics.cuh"
#include "mma_fragments.h"

namespace braid::cuda::probe {
namespace {

// --- GEMM: 32 x 32 block tiles, 32-deep k slices in two cp.async stages, 4 warps each owning a
// 16 x 16 quarter (two m16n8k16 mma per 16-deep step).
constexpr int kTile = 32;
constexpr int kGemmThreads = 128;
// Shared row pitch in 16-bit elements: 80 bytes keeps every row 16-byte aligned (ldmatrix and
// cp.async need it) and staggers the rows across banks.
constexpr int kPitch = 40;

struct alignas(16) GemmTiles {
  uint16_t a[2][kTile][kPitch];  // [stage][m row (row-major A) or k row (col-major A)][...]
  uint16_t b[2][kTile][kPitch];  // [stage][k row (row-major B) or n row (col-major B)][...]
};

// One stage: each thread copies one 16-byte chunk (8 elements) of A's and of B's 32 x 32 slice;
// A through .cg and B through .ca so that the GEMM exercises both forms.
__device__ void gemm_load_stage(GemmTiles& tiles, int stage, const uint16_t* a, const uint16_t* b,
                                int m, int n, int k, bool a_col, bool b_col, int m0, int n0,
                                int k0) {
  const int row = threadIdx.x / 4;
  const int chunk = (threadIdx.x % 4) * 8;
  const uint16_t* a_src = a_col ? a + static_cast<size_t>(k0 + row) * m + m0 + chunk
                                : a + static_cast<size_t>(m0 + row) * k + k0 + chunk;
  const uint16_t* b_src = b_col ? b + static_cast<size_t>(n0 + row) * k + k0 + chunk
                                : b + static_cast<size_t>(k0 + row) * n + n0 + chunk;
  cp_async_cg16(shared_address(&tiles.a[stage][row][chunk]), a_src);
  cp_async_ca<16>(shared_address(&tiles.b[stage][row][chunk]), b_src);
}

__global__ void probe_mma_gemm_kernel(const uint16_t* a, const uint16_t* b, const float* c,
                                      float* d, int m, int n, int k, int f16, int a_col, int b_col,
                                      int bug) {
  __shared__ GemmTiles tiles;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warp_m = (warp / 2) * 16;
  const int warp_n = (warp % 2) * 16;
  const int m0 = blockIdx.y * kTile;
  const int n0 = blockIdx.x * kTile;

  float acc[2][4];
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 4; ++i) {
      const fragment::RowCol at = fragment::mma_m16n8_c(lane, i);
      acc[j][i] = c[static_cast<size_t>(m0 + warp_m + at.row) * n + n0 + warp_n + 8 * j + at.col];
    }
  }

  const int slices = k / kTile;
  gemm_load_stage(tiles, 0, a, b, m, n, k, a_col, b_col, m0, n0, 0);
  cp_async_commit();
  for (int s = 0; s < slices; ++s) {
    if (s + 1 < slices) {
      gemm_load_stage(tiles, (s + 1) % 2, a, b, m, n, k, a_col, b_col, m0, n0, (s + 1) * kTile);
      cp_async_commit();
      cp_async_wait<1>();  // slice s has landed; slice s + 1 may still be in flight
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int stage = s % 2;
    for (int kk = 0; kk < kTile; kk += 16) {
      uint32_t af[4];
      if (a_col) {
        const fragment::RowCol at = fragment::a_kmajor_x4_trans(lane);  // (k, m)
        ldmatrix_x4_trans(af, shared_address(&tiles.a[stage][kk + at.row][warp_m + at.col]));
      } else {
        fragment::RowCol at = fragment::a_rows_x4(lane);  // (m, k)
        if (bug != 0) at.row = lane % 8;                  // planted: rows 0-7 twice
        ldmatrix_x4(af, shared_address(&tiles.a[stage][warp_m + at.row][kk + at.col]));
      }
      uint32_t bf[2][2];
      if (b_col) {
        for (int j = 0; j < 2; ++j) {
          const fragment::RowCol at = fragment::b_nmajor_x2(lane);  // (n, k)
          ldmatrix_x2(bf[j], shared_address(&tiles.b[stage][warp_n + 8 * j + at.row][kk + at.col]));
        }
      } else {
        const fragment::RowCol at = fragment::b_kmajor_x4_trans(lane);  // (k, n)
        uint32_t r[4];
        ldmatrix_x4_trans(r, shared_address(&tiles.b[stage][kk + at.row][warp_n + at.col]));
        bf[0][0] = r[0];
        bf[0][1] = r[1];
        bf[1][0] = r[2];
        bf[1][1] = r[3];
      }
      for (int j = 0; j < 2; ++j) {
        if (f16 != 0) {
          mma_m16n8k16_f16(acc[j], af, bf[j], acc[j]);
        } else {
          mma_m16n8k16_bf16(acc[j], af, bf[j], acc[j]);
        }
      }
    }
    __syncthreads();  // the next iteration's copies overwrite this stage
  }

  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 4; ++i) {
      const fragment::RowCol at = fragment::mma_m16n8_c(lane, i);
      d[static_cast<size_t>(m0 + warp_m + at.row) * n + n0 + warp_n + 8 * j + at.col] = acc[j][i];
    }
  }
}

// --- ldmatrix: the rows of up to four 8 x 8 matrices scattered over 32 slots of 24 elements
// (48 bytes, so every slot starts 16-byte aligned), starting at element 0 or 8 of their slot.
constexpr int kSlots = 32;
constexpr int kSlotPitch = 24;
struct alignas(16) ScatteredRows {
  uint16_t slots[kSlots][kSlotPitch];
};
// Row q (= 8 matrix + row) lives in slot (13 q + 5) % 32; 5 * 13 = 1 (mod 32) inverts it.
__device__ int slot_of_row(int q) {
  return (13 * q + 5) % kSlots;
}
__device__ int row_of_slot(int slot) {
  return (5 * slot + 7) % kSlots;
}
__device__ int row_offset(int q) {
  return 8 * (q % 2);
}

__global__ void probe_ldmatrix_kernel(const uint16_t* matrices, uint32_t* out, int count,
                                      int trans) {
  __shared__ ScatteredRows rows;
  const int lane = threadIdx.x;
  // Each lane fills its own slot, so no two threads write one element.
  {
    const int q = row_of_slot(lane);
    for (int e = 0; e < kSlotPitch; ++e) {
      const int col = e - row_offset(q);
      rows.slots[lane][e] = (q < 8 * count && col >= 0 && col < 8) ? matrices[q * 8 + col]
                                                                   : static_cast<uint16_t>(0xdead);
    }
  }
  __syncthreads();
  const int q = lane % (8 * count);  // lanes past 8 x count repeat valid addresses
  const SharedAddress row = shared_address(&rows.slots[slot_of_row(q)][row_offset(q)]);
  uint32_t r[4] = {0, 0, 0, 0};
  if (count == 1) {
    uint32_t x[1];
    if (trans != 0) {
      ldmatrix_x1_trans(x, row);
    } else {
      ldmatrix_x1(x, row);
    }
    r[0] = x[0];
  } else if (count == 2) {
    uint32_t x[2];
    if (trans != 0) {
      ldmatrix_x2_trans(x, row);
    } else {
      ldmatrix_x2(x, row);
    }
    r[0] = x[0];
    r[1] = x[1];
  } else {
    if (trans != 0) {
      ldmatrix_x4_trans(r, row);
    } else {
      ldmatrix_x4(r, row);
    }
  }
  for (int i = 0; i < count; ++i) out[lane * count + i] = r[i];
}

// --- cp.async copies.
struct alignas(16) CopyTile {
  unsigned char bytes[2][kCopyThreads * 16];
};

template <int Bytes>
__device__ void copy_chunks_ca(CopyTile& tile, const unsigned char* src, unsigned char* out) {
  const int t = threadIdx.x;
  cp_async_ca<Bytes>(shared_address(&tile.bytes[0][t * Bytes]), src + t * Bytes);
  cp_async_wait_all();  // without a commit: wait_all also covers uncommitted copies
  __syncthreads();
  const int from = (t + 1) % kCopyThreads;
  for (int i = 0; i < Bytes; ++i) out[from * Bytes + i] = tile.bytes[0][from * Bytes + i];
}

__global__ void probe_cp_async_kernel(const unsigned char* src, unsigned char* out, int mode) {
  __shared__ CopyTile tile;
  const int t = threadIdx.x;
  const int from = (t + 1) % kCopyThreads;
  switch (static_cast<CopyMode>(mode)) {
    case CopyMode::ca4:
      copy_chunks_ca<4>(tile, src, out);
      return;
    case CopyMode::ca8:
      copy_chunks_ca<8>(tile, src, out);
      return;
    case CopyMode::ca16:
      copy_chunks_ca<16>(tile, src, out);
      return;
    case CopyMode::cg16:
    case CopyMode::cg16_zfill:
      if (static_cast<CopyMode>(mode) == CopyMode::cg16) {
        cp_async_cg16(shared_address(&tile.bytes[0][t * 16]), src + t * 16);
      } else {
        cp_async_cg16_zfill(shared_address(&tile.bytes[0][t * 16]), src + t * 16, t % 17);
      }
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      for (int i = 0; i < 16; ++i) out[from * 16 + i] = tile.bytes[0][from * 16 + i];
      return;
    case CopyMode::two_groups:
      cp_async_cg16(shared_address(&tile.bytes[0][t * 16]), src + t * 16);
      cp_async_commit();
      cp_async_cg16(shared_address(&tile.bytes[1][t * 16]), src + (kCopyThreads + t) * 16);
      cp_async_commit();
      cp_async_wait<1>();  // the older group is complete: the thread may read its own chunk
      for (int i = 0; i < 16; ++i) out[t * 16 + i] = tile.bytes[0][t * 16 + i];
      cp_async_wait<0>();
      __syncthreads();
      for (int i = 0; i < 16; ++i) {
        out[(kCopyThreads + from) * 16 + i] = tile.bytes[1][from * 16 + i];
      }
      return;
  }
}

// Planted bug: reads a cp.async destination that is still in flight.
__global__ void probe_missing_wait_kernel(const unsigned char* src, unsigned char* out,
                                          int newest_group_only) {
  __shared__ CopyTile tile;
  const int t = threadIdx.x;
  cp_async_cg16(shared_address(&tile.bytes[0][t * 16]), src + t * 16);
  cp_async_commit();
  if (newest_group_only != 0) {
    cp_async_cg16(shared_address(&tile.bytes[1][t * 16]), src + (kCopyThreads + t) * 16);
    cp_async_commit();
    cp_async_wait<1>();  // completes the first group only
    out[t] = tile.bytes[1][t * 16];
  } else {
    out[t] = tile.bytes[0][t * 16];
  }
  cp_async_wait_all();
}

__global__ void probe_pack_kernel(const float* lo_hi, uint32_t* out, int pairs, int f16) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const float lo = lo_hi[2 * i];
  const float hi = lo_hi[2 * i + 1];
  out[i] = f16 != 0 ? pack_f16x2(lo, hi) : pack_bf16x2(lo, hi);
}

// Device memory for one probe, freed on every path (a KernelFault out of an emulated launch
// included).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    BRAID_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    BRAID_CUDA_CHECK(
        cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return static_cast<T*>(ptr_); }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    BRAID_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t count_ = 0;
};

void finish_launch() {
  BRAID_CUDA_CHECK_LAUNCH();
  BRAID_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

bool device_available() {
  return device_count() > 0;
}

bool emulated() {
#ifdef BRAID_SIMT
  return true;
#else
  return false;
#endif
}

std::vector<float> mma_gemm(const GemmShape& shape, Input input, Layout a_layout, Layout b_layout,
                            const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                            const std::vector<float>& c, MmaBug bug) {
  const int m = shape.m, n = shape.n, k = shape.k;
  BRAID_CHECK(m > 0 && n > 0 && k > 0 && m % kTile == 0 && n % kTile == 0 && k % kTile == 0,
              "mma_gemm probe: m, n, k = {}, {}, {} must be positive multiples of {}", m, n, k,
              kTile);
  BRAID_CHECK(a.size() == static_cast<size_t>(m) * k && b.size() == static_cast<size_t>(k) * n &&
                  c.size() == static_cast<size_t>(m) * n,
              "mma_gemm probe: operand sizes do not match the shape");
  DeviceBuffer<uint16_t> da(a);
  DeviceBuffer<uint16_t> db(b);
  DeviceBuffer<float> dc(c);
  DeviceBuffer<float> dd(c.size());
  const dim3 grid(n / kTile, m / kTile);
  probe_mma_gemm_kernel<<<grid, kGemmThreads>>>(
      da.get(), db.get(), dc.get(), dd.get(), m, n, k, input == Input::f16 ? 1 : 0,
      a_layout == Layout::col_major ? 1 : 0, b_layout == Layout::col_major ? 1 : 0,
      bug == MmaBug::a_wrong_row_half ? 1 : 0);
  finish_launch();
  return dd.download();
}

std::vector<uint32_t> ldmatrix_fragments(int count, bool trans,
                                         const std::vector<uint16_t>& matrices) {
  BRAID_CHECK(count == 1 || count == 2 || count == 4, "ldmatrix probe: count {} is not 1, 2, 4",
              count);
  BRAID_CHECK(matrices.size() == static_cast<size_t>(count) * 64,
              "ldmatrix probe: {} values for {} matrices", matrices.size(), count);
  DeviceBuffer<uint16_t> dm(matrices);
  DeviceBuffer<uint32_t> out(static_cast<size_t>(32) * count);
  probe_ldmatrix_kernel<<<1, 32>>>(dm.get(), out.get(), count, trans ? 1 : 0);
  finish_launch();
  return out.download();
}

std::vector<uint8_t> cp_async_copy(CopyMode mode, const std::vector<uint8_t>& src) {
  BRAID_CHECK(src.size() == static_cast<size_t>(copy_probe_bytes(mode)),
              "cp.async probe: {} source bytes, the mode copies {}", src.size(),
              copy_probe_bytes(mode));
  DeviceBuffer<uint8_t> ds(src);
  DeviceBuffer<uint8_t> out(src.size());
  probe_cp_async_kernel<<<1, kCopyThreads>>>(ds.get(), out.get(), static_cast<int>(mode));
  finish_launch();
  return out.download();
}

void cp_async_read_before_wait(bool newest_group_only) {
  DeviceBuffer<uint8_t> ds(std::vector<uint8_t>(static_cast<size_t>(kCopyThreads) * 32, 7));
  DeviceBuffer<uint8_t> out(kCopyThreads);
  probe_missing_wait_kernel<<<1, kCopyThreads>>>(ds.get(), out.get(), newest_group_only ? 1 : 0);
  finish_launch();
}

std::vector<uint32_t> pack_pairs(Input input, const std::vector<float>& lo_hi) {
  BRAID_CHECK(lo_hi.size() % 2 == 0 && !lo_hi.empty(), "pack probe: {} values are not pairs",
              lo_hi.size());
  const int pairs = static_cast<int>(lo_hi.size() / 2);
  DeviceBuffer<float> din(lo_hi);
  DeviceBuffer<uint32_t> out(pairs);
  probe_pack_kernel<<<(pairs + 127) / 128, 128>>>(din.get(), out.get(), pairs,
                                                  input == Input::f16 ? 1 : 0);
  finish_launch();
  return out.download();
}

}  // namespace braid::cuda::probe
