// Host-only checks of the tensor-core layouts and half-precision conversions the emulated
// intrinsics rest on: kernels/mma_fragments.h against the PTX ISA's formulas, the ldmatrix
// address recipes composed into mma fragments, and the emulator's cuda_bf16.h / cuda_fp16.h
// conversions against an independent float64 rounding reference. No device, no emulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "mma_fragments.h"
#include "simt/include/cuda_bf16.h"
#include "simt/include/cuda_fp16.h"

namespace braid {
namespace {

using cuda::fragment::RowCol;
namespace frag = cuda::fragment;

// --- The PTX ISA's formulas, transcribed as written in "Matrix Fragments for mma.m16n8k16 with
// floating point type" (groupID = %laneid >> 2, threadID_in_group = %laneid % 4).

RowCol manual_a(int lane, int i) {
  const int group_id = lane >> 2;
  const int thread_id_in_group = lane % 4;
  const int row = ((0 <= i && i < 2) || (4 <= i && i < 6)) ? group_id : group_id + 8;
  const int col =
      i < 4 ? (thread_id_in_group * 2) + (i & 0x1) : (thread_id_in_group * 2) + (i & 0x1) + 8;
  return {row, col};
}

RowCol manual_b(int lane, int i) {
  const int group_id = lane >> 2;
  const int thread_id_in_group = lane % 4;
  const int row =
      i < 2 ? (thread_id_in_group * 2) + (i & 0x1) : (thread_id_in_group * 2) + (i & 0x1) + 8;
  return {row, group_id};
}

RowCol manual_c(int lane, int i) {
  const int group_id = lane >> 2;
  const int thread_id_in_group = lane % 4;
  const int row = i < 2 ? group_id : group_id + 8;
  return {row, (thread_id_in_group * 2) + (i & 0x1)};
}

// "Warp-level matrix load instruction: ldmatrix", Figure "ldmatrix fragment layout": thread 0
// receives the first fragment of row 0, a group of four threads loads an entire row.
RowCol manual_ldmatrix(int lane, int j, bool trans) {
  const int row = lane / 4;
  const int col = 2 * (lane % 4) + j;
  return trans ? RowCol{col, row} : RowCol{row, col};  // .trans: the stored matrix's transpose
}

TEST(CudaIntrinsicsHost, MmaFragmentLayoutsMatchThePtxIsa) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) EXPECT_EQ(frag::mma_m16n8k16_a(lane, i), manual_a(lane, i));
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(frag::mma_m16n8k16_b(lane, i), manual_b(lane, i));
      EXPECT_EQ(frag::mma_m16n8_c(lane, i), manual_c(lane, i));
    }
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(frag::ldmatrix_m8n8(lane, j, false), manual_ldmatrix(lane, j, false));
      EXPECT_EQ(frag::ldmatrix_m8n8(lane, j, true), manual_ldmatrix(lane, j, true));
    }
  }
  // Spot values read off the manual's figures: lane 5 (group 1, thread 1) holds A(1, 2..3) in
  // a0/a1, A(9, 10..11) in a6/a7, B(2..3, 1) in b0/b1 and C(9, 3) in c3.
  EXPECT_EQ(frag::mma_m16n8k16_a(5, 0), (RowCol{1, 2}));
  EXPECT_EQ(frag::mma_m16n8k16_a(5, 7), (RowCol{9, 11}));
  EXPECT_EQ(frag::mma_m16n8k16_b(5, 1), (RowCol{3, 1}));
  EXPECT_EQ(frag::mma_m16n8_c(5, 3), (RowCol{9, 3}));
}

// Each layout places every element of its tile in exactly one (lane, element).
template <class Layout>
void expect_covers_once(Layout layout, int elements, int rows, int cols) {
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < elements; ++i) {
      const RowCol at = layout(lane, i);
      ASSERT_TRUE(at.row >= 0 && at.row < rows && at.col >= 0 && at.col < cols);
      EXPECT_TRUE(seen.insert({at.row, at.col}).second) << at.row << ", " << at.col;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(rows * cols));
}

TEST(CudaIntrinsicsHost, EveryFragmentLayoutCoversItsTileOnce) {
  expect_covers_once(frag::mma_m16n8k16_a, 8, 16, 16);
  expect_covers_once(frag::mma_m16n8k16_b, 4, 16, 8);
  expect_covers_once(frag::mma_m16n8_c, 4, 16, 8);
  expect_covers_once([](int lane, int j) { return frag::ldmatrix_m8n8(lane, j, false); }, 2, 8, 8);
  expect_covers_once([](int lane, int j) { return frag::ldmatrix_m8n8(lane, j, true); }, 2, 8, 8);
}

// ldmatrix composed with a row-address recipe: the stored (row, col) that register `reg`, half
// `j` of `lane` receives, when every lane L passes the address of stored position recipe(L).
template <class Recipe>
RowCol loaded_position(Recipe recipe, int lane, int reg, int j, bool trans) {
  const RowCol in_matrix = frag::ldmatrix_m8n8(lane, j, trans);
  const RowCol row_start = recipe(frag::ldmatrix_address_lane(reg, in_matrix.row));
  return {row_start.row, row_start.col + in_matrix.col};
}

RowCol swapped(RowCol p) {
  return {p.col, p.row};
}

TEST(CudaIntrinsicsHost, LdmatrixRecipesDeliverMmaFragments) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int j = 0; j < 2; ++j) {
        const int a_element = 2 * reg + j;
        // A[m][k] with .x4: stored (m, k) is A's (row, col).
        EXPECT_EQ(loaded_position(frag::a_rows_x4, lane, reg, j, false),
                  frag::mma_m16n8k16_a(lane, a_element));
        // At[k][m] with .x4.trans: stored (k, m).
        EXPECT_EQ(swapped(loaded_position(frag::a_kmajor_x4_trans, lane, reg, j, true)),
                  frag::mma_m16n8k16_a(lane, a_element));
        // B[k][n], two n8 tiles, .x4.trans: registers 2 t and 2 t + 1 are tile t's b fragment.
        RowCol b = frag::mma_m16n8k16_b(lane, 2 * (reg % 2) + j);
        b.col += 8 * (reg / 2);
        EXPECT_EQ(loaded_position(frag::b_kmajor_x4_trans, lane, reg, j, true), b);
      }
    }
    for (int reg = 0; reg < 2; ++reg) {
      for (int j = 0; j < 2; ++j) {
        const RowCol b = frag::mma_m16n8k16_b(lane, 2 * reg + j);
        // Bt[n][k] with .x2: stored (n, k).
        EXPECT_EQ(swapped(loaded_position(frag::b_nmajor_x2, lane, reg, j, false)), b);
        // B[k][n] with .x2.trans: stored (k, n).
        EXPECT_EQ(loaded_position(frag::b_kmajor_x2_trans, lane, reg, j, true), b);
      }
    }
  }
}

TEST(CudaIntrinsicsHost, WrongRowHalfIsAWrongFragment) {
  // The probe's planted bug (rows lane % 8 instead of lane % 16) must not pass for a layout.
  const auto wrong = [](int lane) { return RowCol{lane % 8, (lane / 16) * 8}; };
  int mismatches = 0;
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int j = 0; j < 2; ++j) {
        mismatches += !(loaded_position(wrong, lane, reg, j, false) ==
                        frag::mma_m16n8k16_a(lane, 2 * reg + j));
      }
    }
  }
  EXPECT_EQ(mismatches, 32 * 4);  // registers a1 and a3 (a2, a3, a6, a7) of every lane
}

TEST(CudaIntrinsicsHost, AdjacentAccumulatorTilesAreAnAFragment) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int half = 0; half < 2; ++half) {
        RowCol from = frag::mma_m16n8_c(lane, frag::a_register_source_element(reg, half));
        from.col += 8 * frag::a_register_source_tile(reg);
        EXPECT_EQ(from, frag::mma_m16n8k16_a(lane, 2 * reg + half));
      }
    }
  }
}

// --- Conversions. The reference rounds in float64, which holds every float exactly: scale to
// the format's quantum at that magnitude, round to an integer (nearbyint: ties to even in the
// default rounding mode, or trunc), scale back; overflow past the largest finite value goes to
// infinity (to nearest) or saturates (toward zero).
struct Format {
  int precision;  // significand bits, the implicit one included
  int emin;       // exponent of the smallest normal
  int emax;       // exponent of the largest finite
};
constexpr Format kBf16{8, -126, 127};
constexpr Format kF16{11, -14, 15};

double reference_round(double v, Format f, bool toward_zero) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e = 0;
  std::frexp(v, &e);  // |v| = m 2^e, m in [0.5, 1): the leading bit is 2^(e - 1)
  const int quantum = std::max(e - 1, f.emin) - (f.precision - 1);
  const double scaled = std::ldexp(v, -quantum);
  const double r = std::ldexp(toward_zero ? std::trunc(scaled) : std::nearbyint(scaled), quantum);
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  if (std::fabs(r) > largest)
    return toward_zero ? std::copysign(largest, v) : std::copysign(INFINITY, v);
  return r;
}

// The value of a 16-bit pattern, decoded from the format's definition.
double reference_decode(uint16_t bits, Format f) {
  const int mantissa_bits = f.precision - 1;
  const int exponent_bits = 15 - mantissa_bits;
  const int bias = f.emax;
  const int exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == (1 << exponent_bits) - 1) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, f.emin - mantissa_bits);
  return sign * std::ldexp(mantissa + (1 << mantissa_bits), exponent - bias - mantissa_bits);
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Floats that reach every rounding case: all 2^16 upper halves with low halves at, just below
// and just above the bf16 and f16 (normal and subnormal) rounding points, plus random ones.
std::vector<float> conversion_inputs() {
  static const uint32_t kLow[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000,
                                  0x2001, 0x3fff, 0x4000, 0x4001, 0x6000, 0x7fff, 0x8000,
                                  0x8001, 0xa000, 0xc000, 0xe000, 0xffff};
  std::vector<float> out;
  for (uint32_t high = 0; high < 0x10000u; ++high) {
    for (uint32_t low : kLow) out.push_back(from_bits((high << 16) | low));
  }
  std::mt19937 rng(22);
  for (int i = 0; i < 1 << 20; ++i) out.push_back(from_bits(static_cast<uint32_t>(rng())));
  return out;
}

// Checks one conversion; false (after reporting) when it is wrong.
bool converts(uint16_t bits, float x, Format f, bool toward_zero, const char* what) {
  if (std::isnan(x)) {
    EXPECT_EQ(bits, 0x7fff) << what << " of a NaN is the canonical NaN";
    return bits == 0x7fff;
  }
  const double want = reference_round(x, f, toward_zero);
  const double got = reference_decode(bits, f);
  if (got == want && std::signbit(got) == std::signbit(want)) return true;
  uint32_t xbits;
  std::memcpy(&xbits, &x, 4);
  ADD_FAILURE() << what << " of " << x << " (0x" << std::hex << xbits << ") gave 0x" << bits
                << std::dec << " = " << got << ", want " << want;
  return false;
}

TEST(CudaIntrinsicsHost, FloatToBf16RoundsToNearestEven) {
  int failures = 0;  // reported one by one, up to a readable number
  for (float x : conversion_inputs()) {
    bool ok = converts(__bfloat16_as_ushort(__float2bfloat16_rn(x)), x, kBf16, false, "bf16 rn");
    ok &= converts(__bfloat16_as_ushort(__float2bfloat16_rz(x)), x, kBf16, true, "bf16 rz");
    if (!ok && ++failures > 20) break;
  }
  // The implicit conversion and the packed form are the same rounding.
  EXPECT_EQ(__bfloat16_as_ushort(__nv_bfloat16(1.00390625f)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(__bfloat16_as_ushort(__nv_bfloat16(1.01171875f)), 0x3f82);  // tie to even (up)
  const __nv_bfloat162 pair = __floats2bfloat162_rn(1.0f, -2.0f);
  EXPECT_EQ(__bfloat16_as_ushort(pair.x), 0x3f80);
  EXPECT_EQ(__bfloat16_as_ushort(pair.y), 0xc000);
  EXPECT_EQ(__high2float(pair), -2.0f);
}

TEST(CudaIntrinsicsHost, FloatToHalfRoundsToNearestEven) {
  int failures = 0;
  for (float x : conversion_inputs()) {
    bool ok = converts(__half_as_ushort(__float2half_rn(x)), x, kF16, false, "f16 rn");
    ok &= converts(__half_as_ushort(__float2half_rz(x)), x, kF16, true, "f16 rz");
#if defined(__FLT16_MAX__)
    // A second, independent reference: the compiler's own binary16 conversion.
    if (!std::isnan(x)) {
      const _Float16 h = static_cast<_Float16>(x);
      uint16_t hb;
      std::memcpy(&hb, &h, 2);
      EXPECT_EQ(__half_as_ushort(__float2half_rn(x)), hb) << x;
      ok &= __half_as_ushort(__float2half_rn(x)) == hb;
    }
#endif
    if (!ok && ++failures > 20) break;
  }
  EXPECT_EQ(__half_as_ushort(__float2half_rn(65504.0f)), 0x7bff);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(65519.996f)), 0x7bff);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(65520.0f)), 0x7c00);  // the tie goes to infinity
  EXPECT_EQ(__half_as_ushort(__float2half_rn(0x1p-25f)), 0x0000);  // tie to even: zero
  EXPECT_EQ(__half_as_ushort(__float2half_rn(0x1.000002p-25f)), 0x0001);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(-0x1.8p-24f)), 0x8002);  // 1.5 quanta: to even
  const __half2 pair = __floats2half2_rn(0.5f, 3.0f);
  EXPECT_EQ(__half_as_ushort(pair.x), 0x3800);
  EXPECT_EQ(__half_as_ushort(pair.y), 0x4200);
}

TEST(CudaIntrinsicsHost, HalfAndBf16ToFloatAreExact) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const double half_ref = reference_decode(b, kF16);
    const double bf16_ref = reference_decode(b, kBf16);
    const float half_value = __half2float(__ushort_as_half(b));
    const float bf16_value = __bfloat162float(__ushort_as_bfloat16(b));
    if (std::isnan(half_ref)) {
      EXPECT_TRUE(std::isnan(half_value)) << bits;
    } else {
      EXPECT_EQ(half_value, half_ref) << bits;
      EXPECT_EQ(std::signbit(half_value), std::signbit(half_ref)) << bits;
      EXPECT_EQ(__half_as_ushort(__float2half_rn(half_value)), b) << "round trip " << bits;
    }
    if (std::isnan(bf16_ref)) {
      EXPECT_TRUE(std::isnan(bf16_value)) << bits;
    } else {
      EXPECT_EQ(bf16_value, bf16_ref) << bits;
      EXPECT_EQ(std::signbit(bf16_value), std::signbit(bf16_ref)) << bits;
      EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(bf16_value)), b) << "round trip " << bits;
    }
  }
}

}  // namespace
}  // namespace braid
