// Host entry points of the test kernels for kernels/device_intrinsics.cuh (ldmatrix + mma.sync
// tiles, cp.async copies, bf16/f16 packing), run by tests/gpu/test_intrinsics.cpp on a device
// and under the SIMT emulator. Plain C++: host vectors in and out, device memory inside.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::cuda::probe {

// True when a device (real, or the emulator's) can run the probes.
bool device_available();
// True when the probes were compiled for the SIMT emulator (BRAID_SIMT), where the planted-bug
// kernels that only the emulator can diagnose are meaningful.
bool emulated();

enum class Input { bf16, f16 };
enum class Layout { row_major, col_major };
// Planted bugs: `a_wrong_row_half` gives lanes 8-15 of the A ldmatrix.x4 the addresses of rows
// 0-7, so registers a1 and a3 hold the wrong half of the tile (a wrong fragment index).
enum class MmaBug { none, a_wrong_row_half };

struct GemmShape {
  int m = 64;  // multiple of 32
  int n = 64;  // multiple of 32
  int k = 64;  // multiple of 32
};

// d = a b + c through cp.async (two stages) -> ldmatrix -> mma.sync m16n8k16 with fp32
// accumulation. `a` holds m x k and `b` k x n 16-bit patterns of `input`, each stored in its
// layout (row-major a: a[i * k + p]; col-major a: a[p * m + i]; row-major b: b[p * n + j];
// col-major b: b[j * k + p]); c and the result are row-major m x n floats. Row-major A is read
// with ldmatrix.x4, col-major A with .x4.trans, row-major B with .x4.trans, col-major B with
// two .x2.
std::vector<float> mma_gemm(const GemmShape& shape, Input input, Layout a_layout, Layout b_layout,
                            const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                            const std::vector<float>& c, MmaBug bug = MmaBug::none);

// One warp loads `count` (1, 2 or 4) 8 x 8 matrices of 16-bit values (`matrices`: count * 64,
// matrix after matrix, row-major) with ldmatrix.x{count}{.trans}; the rows sit scattered in
// shared memory. Returns register r of lane l at [l * count + r].
std::vector<uint32_t> ldmatrix_fragments(int count, bool trans,
                                         const std::vector<uint16_t>& matrices);

enum class CopyMode {
  ca4,         // cp.async.ca, 4 bytes per thread, wait_all
  ca8,         // cp.async.ca, 8 bytes per thread, wait_all
  ca16,        // cp.async.ca, 16 bytes per thread, wait_all
  cg16,        // cp.async.cg, 16 bytes per thread, commit + wait_group 0
  cg16_zfill,  // cp.async.cg with src-size = thread % 17: the rest of the 16 bytes zero-filled
  two_groups,  // two committed groups; the older one is read after wait_group 1, the newer one
               // after wait_group 0
};
constexpr int kCopyThreads = 64;
// The bytes one copy probe moves: kCopyThreads chunks of the mode's size (two 16-byte chunks per
// thread for two_groups).
constexpr int copy_probe_bytes(CopyMode mode) {
  switch (mode) {
    case CopyMode::ca4:
      return kCopyThreads * 4;
    case CopyMode::ca8:
      return kCopyThreads * 8;
    case CopyMode::two_groups:
      return kCopyThreads * 32;
    default:
      return kCopyThreads * 16;
  }
}
// kCopyThreads threads copy `src` (copy_probe_bytes(mode) bytes) global -> shared with cp.async;
// after the wait and a barrier each thread stores its neighbour's chunk to the result, so the
// result also shows the copies being visible block-wide.
std::vector<uint8_t> cp_async_copy(CopyMode mode, const std::vector<uint8_t>& src);

// Planted bugs for the emulator: a thread reads its cp.async destination before waiting for it
// (kernel probe_missing_wait_kernel; `newest_group_only`: it waits with wait_group 1, which leaves
// the group it then reads in flight). The emulator reports a fault naming the kernel; on a device
// the result is a race, so tests run these only when emulated().
void cp_async_read_before_wait(bool newest_group_only);

// pack_bf16x2 / pack_f16x2 of the pairs (lo_hi[2 i], lo_hi[2 i + 1]) on the device.
std::vector<uint32_t> pack_pairs(Input input, const std::vector<float>& lo_hi);

}  // namespace braid::cuda::probe
