// Which matrix element each lane's registers hold for mma.sync m16n8k16 and ldmatrix m8n8, as
// the PTX ISA documents them, and the ldmatrix row addresses that produce the mma fragments.
//
// Plain C++ constexpr (host and device): the emulated intrinsics (device_intrinsics.cuh), the
// kernels that place fragments in memory, and the host-only layout test all use these, so the
// emulation and the kernels agree by construction and the test checks both against the manual.
#pragma once

#if defined(__CUDACC__)
#define BRAID_FRAGMENT_FN __host__ __device__ constexpr inline
#else
#define BRAID_FRAGMENT_FN constexpr inline
#endif

namespace braid::cuda::fragment {

// A position in a tile: row and column, as the PTX ISA names them for that matrix (for B of an
// mma that is (k, n); for an ldmatrix 8x8 matrix it is the row and column as stored in memory).
struct RowCol {
  int row = 0;
  int col = 0;
  BRAID_FRAGMENT_FN bool operator==(const RowCol& other) const {
    return row == other.row && col == other.col;
  }
};

// The PTX ISA's names: groupID = %laneid >> 2, threadID_in_group = %laneid % 4.
BRAID_FRAGMENT_FN int group_id(int lane) {
  return lane >> 2;
}
BRAID_FRAGMENT_FN int thread_in_group(int lane) {
  return lane & 3;
}

// --- mma.sync.aligned.m16n8k16 with .f16/.bf16 inputs and .f32 accumulators -----------------
// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type". Element a_i of a lane
// is the (i % 2) half of its register i / 2, low half first ("Elements (low to high)").

// A (16 x 16, row-major in the operation): 4 registers, elements a0..a7.
//   row = groupID for a_i with 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise
//   col = threadID_in_group * 2 + (i & 1) for i < 4, + 8 for i >= 4
BRAID_FRAGMENT_FN RowCol mma_m16n8k16_a(int lane, int i) {
  return {group_id(lane) + 8 * ((i >> 1) & 1), thread_in_group(lane) * 2 + (i & 1) + 8 * (i >> 2)};
}
// B (16 x 8 = k x n, "col" in the operation): 2 registers, elements b0..b3.
//   row = threadID_in_group * 2 + (i & 1) for i < 2, + 8 for i >= 2;  col = groupID
BRAID_FRAGMENT_FN RowCol mma_m16n8k16_b(int lane, int i) {
  return {thread_in_group(lane) * 2 + (i & 1) + 8 * (i >> 1), group_id(lane)};
}
// C and D (16 x 8, fp32): 4 floats, c0..c3.
//   row = groupID for i < 2, groupID + 8 for i >= 2;  col = threadID_in_group * 2 + (i & 1)
BRAID_FRAGMENT_FN RowCol mma_m16n8_c(int lane, int i) {
  return {group_id(lane) + 8 * (i >> 1), thread_in_group(lane) * 2 + (i & 1)};
}

// --- ldmatrix.sync.aligned.m8n8{.x1,.x2,.x4}{.trans}.shared.b16 --------------------------------
// PTX ISA, "Warp-level matrix load instruction: ldmatrix": lane 8 * m + r gives the address of
// row r of matrix m (lanes 0-7 for .x1, 0-15 for .x2, all for .x4; the others are ignored).
// Register m of every lane receives matrix m: "a group of four threads loads an entire row", so
// lane l gets row l / 4, columns 2 * (l % 4) and 2 * (l % 4) + 1 (element j = 0 low, 1 high).
// With .trans the matrix is read column-major: the same lane gets the transpose's row l / 4,
// i.e. stored row 2 * (l % 4) + j of stored column l / 4.
BRAID_FRAGMENT_FN int ldmatrix_address_lane(int matrix, int row) {
  return 8 * matrix + row;
}
BRAID_FRAGMENT_FN RowCol ldmatrix_m8n8(int lane, int j, bool trans) {
  return trans ? RowCol{thread_in_group(lane) * 2 + j, group_id(lane)}
               : RowCol{group_id(lane), thread_in_group(lane) * 2 + j};
}

// --- Row addresses that make ldmatrix deliver mma fragments ------------------------------------
// Each returns the (row, col) of the tile in shared memory, as stored, whose address lane `lane`
// passes; the host test composes them with the two layouts above.

// A 16 x 16 stored row-major (A[m][k]), ldmatrix.x4: registers r0..r3 = the four 8 x 8 quarters
// in a0..a7 order: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
BRAID_FRAGMENT_FN RowCol a_rows_x4(int lane) {
  return {lane % 16, (lane / 16) * 8};
}
// A stored k-major (At[k][m], i.e. A column-major), ldmatrix.x4.trans: same quarters, addressed
// as rows of At. Returns (k, m).
BRAID_FRAGMENT_FN RowCol a_kmajor_x4_trans(int lane) {
  return {(lane / 16) * 8 + lane % 8, ((lane / 8) % 2) * 8};
}
// B 16 x 8 stored n-major (Bt[n][k], i.e. B column-major), ldmatrix.x2: r0 = k 0-7, r1 = k 8-15.
// Returns (n, k). Lanes 16-31 repeat lanes 0-15 (their addresses are ignored but stay valid).
BRAID_FRAGMENT_FN RowCol b_nmajor_x2(int lane) {
  return {lane % 8, ((lane / 8) % 2) * 8};
}
// B 16 x 16 (two n8 tiles) stored k-major (B[k][n], B row-major), ldmatrix.x4.trans: r0, r1 =
// the b registers of columns 0-7, r2, r3 = those of columns 8-15. Returns (k, n).
BRAID_FRAGMENT_FN RowCol b_kmajor_x4_trans(int lane) {
  return {((lane / 8) % 2) * 8 + lane % 8, (lane / 16) * 8};
}
// B stored k-major, one n8 tile, ldmatrix.x2.trans. Returns (k, n).
BRAID_FRAGMENT_FN RowCol b_kmajor_x2_trans(int lane) {
  return {lane % 16, 0};
}

// The accumulators of two adjacent 16 x 8 mma results (columns 0-7 and 8-15 of a 16 x 16 tile)
// are, element for element, the A fragment of that 16 x 16 tile as the next mma's A operand
// (attention's P V): A register r holds C tile r / 2, elements 2 (r % 2) and 2 (r % 2) + 1.
BRAID_FRAGMENT_FN int a_register_source_tile(int reg) {
  return reg / 2;
}
BRAID_FRAGMENT_FN int a_register_source_element(int reg, int half) {
  return 2 * (reg % 2) + half;
}

}  // namespace braid::cuda::fragment
