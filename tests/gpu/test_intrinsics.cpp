// The intrinsics of kernels/device_intrinsics.cuh run through kernels/testing/intrinsics_probe.cu:
// random tiles multiplied through cp.async + ldmatrix + mma.sync against a float64 product, raw
// ldmatrix fragments against the PTX ISA's layout, cp.async copies, packing; and planted bugs.
// The same tests run on a device and under the SIMT emulator (skipped with neither).
//
// GEMM tolerance: products of two bf16 or two f16 values are exact in fp32 (8 + 8 and 11 + 11
// significant bits; the inputs here stay far from fp32's range limits), so all the error is in
// accumulating the k products onto C. If each of the k additions errs by at most u relative to
// its result, |d - exact| <= gamma_k * sum(|c| + |a b|), gamma_k = k u / (1 - k u), in any order
// (Higham, "Accuracy and Stability of Numerical Algorithms", section 3.1).
// - Emulated: the documented order, sequential fp32 fma rounding to nearest: u = 2^-24.
// - Device: the tensor core's internal order and rounding are not specified (measured parts align
//   the addends of one mma to the largest and truncate). Truncating each of an mma's 17 addends
//   (C and 16 products) costs at most 2^-23 of the largest, so the k / 16 mma of a k-deep product
//   cost at most 17 k / 16 * 2^-23 * sum(|c| + |a b|); 2 gamma_k with u = 2^-23 bounds that and
//   faithful rounding of every single addition alike.
// Both bounds are orders of magnitude below the error of a wrong fragment (the planted bug).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "braid/core/error.h"

#ifdef BRAID_WITH_INTRINSICS_PROBE
#include "testing/intrinsics_probe.cuh"
#endif

#ifndef BRAID_WITH_INTRINSICS_PROBE

TEST(CudaIntrinsics, NotBuilt) {
  GTEST_SKIP() << "the intrinsics probe is built with CUDA or under the SIMT emulator";
}

#else

namespace braid {
namespace {

namespace probe = cuda::probe;
using probe::Input;
using probe::Layout;

#define BRAID_REQUIRE_DEVICE()                                                           \
  do {                                                                                   \
    if (!probe::device_available()) GTEST_SKIP() << "no CUDA device (real or emulated)"; \
  } while (0)

// --- 16-bit values, decoded from the formats' definitions (not from any header under test).
double decode(uint16_t bits, Input input) {
  const int mantissa_bits = input == Input::bf16 ? 7 : 10;
  const int bias = input == Input::bf16 ? 127 : 15;
  const int exponent_mask = input == Input::bf16 ? 0xff : 0x1f;
  const int exponent = (bits >> mantissa_bits) & exponent_mask;
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == exponent_mask) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * std::ldexp(mantissa + (1 << mantissa_bits), exponent - bias - mantissa_bits);
}

// Random values in +-[2^-3, 2^3), zero one time in 16: representable in both formats by
// construction (a random sign, exponent and significand).
std::vector<uint16_t> random_values(size_t count, Input input, std::mt19937& rng) {
  const int mantissa_bits = input == Input::bf16 ? 7 : 10;
  const int bias = input == Input::bf16 ? 127 : 15;
  std::vector<uint16_t> out(count);
  for (uint16_t& v : out) {
    const uint32_t r = rng();
    if (r % 16 == 0) {
      v = 0;
      continue;
    }
    const int exponent = static_cast<int>((r >> 4) % 6) - 3;
    const uint32_t mantissa = (r >> 8) & ((1u << mantissa_bits) - 1);
    const uint32_t sign = (r >> 20) & 1u;
    v = static_cast<uint16_t>((sign << 15) |
                              (static_cast<uint32_t>(exponent + bias) << mantissa_bits) | mantissa);
  }
  return out;
}

struct GemmCase {
  Input input;
  Layout a_layout;
  Layout b_layout;
};

std::string name(const GemmCase& c) {
  return std::string(c.input == Input::bf16 ? "bf16" : "f16") +
         (c.a_layout == Layout::row_major ? " A row-major" : " A col-major") +
         (c.b_layout == Layout::row_major ? ", B row-major" : ", B col-major");
}

struct GemmRun {
  std::vector<float> d;
  std::vector<double> exact;
  std::vector<double> magnitude;  // sum of |c| and |a b| per output
};

GemmRun run_gemm(const GemmCase& gc, const probe::GemmShape& s, probe::MmaBug bug, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<uint16_t> a = random_values(static_cast<size_t>(s.m) * s.k, gc.input, rng);
  const std::vector<uint16_t> b = random_values(static_cast<size_t>(s.k) * s.n, gc.input, rng);
  std::vector<float> c(static_cast<size_t>(s.m) * s.n);
  std::normal_distribution<float> normal;
  for (float& v : c) v = normal(rng);

  const auto a_at = [&](int i, int p) {
    return decode(gc.a_layout == Layout::row_major ? a[static_cast<size_t>(i) * s.k + p]
                                                   : a[static_cast<size_t>(p) * s.m + i],
                  gc.input);
  };
  const auto b_at = [&](int p, int j) {
    return decode(gc.b_layout == Layout::row_major ? b[static_cast<size_t>(p) * s.n + j]
                                                   : b[static_cast<size_t>(j) * s.k + p],
                  gc.input);
  };
  GemmRun run;
  run.exact.resize(c.size());
  run.magnitude.resize(c.size());
  for (int i = 0; i < s.m; ++i) {
    for (int j = 0; j < s.n; ++j) {
      double sum = c[static_cast<size_t>(i) * s.n + j];
      double mag = std::fabs(sum);
      for (int p = 0; p < s.k; ++p) {
        const double product = a_at(i, p) * b_at(p, j);
        sum += product;  // exact, or off by 2^-53 relative: nothing against the bound
        mag += std::fabs(product);
      }
      run.exact[static_cast<size_t>(i) * s.n + j] = sum;
      run.magnitude[static_cast<size_t>(i) * s.n + j] = mag;
    }
  }
  run.d = probe::mma_gemm(s, gc.input, gc.a_layout, gc.b_layout, a, b, c, bug);
  return run;
}

// The accumulation bound of the file comment.
double gemm_bound_factor(int k) {
  const double ulp = probe::emulated() ? 0x1p-24 : 0x1p-23;
  const double gamma = k * ulp / (1 - k * ulp);
  return probe::emulated() ? gamma : 2 * gamma;
}

const GemmCase kGemmCases[] = {
    {Input::bf16, Layout::row_major, Layout::row_major},
    {Input::bf16, Layout::row_major, Layout::col_major},
    {Input::bf16, Layout::col_major, Layout::row_major},
    {Input::bf16, Layout::col_major, Layout::col_major},
    {Input::f16, Layout::row_major, Layout::row_major},
    {Input::f16, Layout::row_major, Layout::col_major},
    {Input::f16, Layout::col_major, Layout::row_major},
    {Input::f16, Layout::col_major, Layout::col_major},
};

TEST(CudaIntrinsics, MmaGemmMatchesFloat64Product) {
  BRAID_REQUIRE_DEVICE();
  // Two blocks each way and two k slices: both cp.async stages, wait_group 1 and 0.
  const probe::GemmShape shape{64, 64, 64};
  const double factor = gemm_bound_factor(shape.k);
  uint32_t seed = 1;
  for (const GemmCase& gc : kGemmCases) {
    SCOPED_TRACE(name(gc));
    const GemmRun run = run_gemm(gc, shape, probe::MmaBug::none, seed++);
    int bad = 0;
    for (size_t i = 0; i < run.d.size() && bad < 10; ++i) {
      const double error = std::fabs(run.d[i] - run.exact[i]);
      if (!(error <= factor * run.magnitude[i])) {
        ++bad;
        ADD_FAILURE() << "d[" << i / shape.n << "][" << i % shape.n << "] = " << run.d[i]
                      << ", float64 " << run.exact[i] << ", error " << error << " > bound "
                      << factor * run.magnitude[i];
      }
    }
  }
}

TEST(CudaIntrinsics, WrongMmaFragmentIndexIsCaught) {
  BRAID_REQUIRE_DEVICE();
  // Planted: the A ldmatrix gives lanes 8-15 rows 0-7, so registers a1/a3 hold the wrong row half
  // and rows 8-15 of every warp tile are wrong; the comparison above must see it.
  const probe::GemmShape shape{32, 32, 32};
  const double factor = gemm_bound_factor(shape.k);
  for (Input input : {Input::bf16, Input::f16}) {
    const GemmRun run = run_gemm({input, Layout::row_major, Layout::row_major}, shape,
                                 probe::MmaBug::a_wrong_row_half, 7);
    size_t wrong = 0;
    for (size_t i = 0; i < run.d.size(); ++i) {
      wrong += !(std::fabs(run.d[i] - run.exact[i]) <= factor * run.magnitude[i]);
    }
    // Half the rows read the wrong A rows; a few products may agree by chance (zeros).
    EXPECT_GT(wrong, run.d.size() / 4) << (input == Input::bf16 ? "bf16" : "f16");
  }
}

TEST(CudaIntrinsics, LdmatrixFragmentsFollowThePtxIsaLayout) {
  BRAID_REQUIRE_DEVICE();
  std::mt19937 rng(3);
  for (int count : {1, 2, 4}) {
    for (bool trans : {false, true}) {
      SCOPED_TRACE("x" + std::to_string(count) + (trans ? ".trans" : ""));
      std::vector<uint16_t> matrices(static_cast<size_t>(count) * 64);
      for (uint16_t& v : matrices) v = static_cast<uint16_t>(rng());
      const std::vector<uint32_t> got = probe::ldmatrix_fragments(count, trans, matrices);
      ASSERT_EQ(got.size(), static_cast<size_t>(32) * count);
      // PTX ISA, ldmatrix: lane l receives row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of
      // each matrix, low half first; .trans reads the matrix column-major (its transpose).
      for (int lane = 0; lane < 32; ++lane) {
        for (int m = 0; m < count; ++m) {
          uint32_t want = 0;
          for (int j = 0; j < 2; ++j) {
            const int row = lane / 4;
            const int col = 2 * (lane % 4) + j;
            const int stored = trans ? col * 8 + row : row * 8 + col;
            want |= static_cast<uint32_t>(matrices[m * 64 + stored]) << (16 * j);
          }
          EXPECT_EQ(got[lane * count + m], want) << "lane " << lane << ", register " << m;
        }
      }
    }
  }
}

TEST(CudaIntrinsics, CpAsyncCopiesEveryForm) {
  BRAID_REQUIRE_DEVICE();
  using probe::CopyMode;
  std::mt19937 rng(5);
  for (CopyMode mode : {CopyMode::ca4, CopyMode::ca8, CopyMode::ca16, CopyMode::cg16,
                        CopyMode::cg16_zfill, CopyMode::two_groups}) {
    SCOPED_TRACE(static_cast<int>(mode));
    std::vector<uint8_t> src(probe::copy_probe_bytes(mode));
    for (uint8_t& v : src) v = static_cast<uint8_t>(rng() | 1);  // never zero: zero-fill shows
    std::vector<uint8_t> want = src;
    if (mode == CopyMode::cg16_zfill) {
      for (int t = 0; t < probe::kCopyThreads; ++t) {
        for (int i = t % 17; i < 16; ++i) want[t * 16 + i] = 0;
      }
    }
    EXPECT_EQ(probe::cp_async_copy(mode, src), want);
  }
}

TEST(CudaIntrinsics, MissingCpAsyncWaitIsAFaultNamingTheKernel) {
  BRAID_REQUIRE_DEVICE();
  if (!probe::emulated()) GTEST_SKIP() << "on a device an early read is a silent race";
  for (bool newest_group_only : {false, true}) {
    SCOPED_TRACE(newest_group_only ? "wait_group 1, newest group read" : "no wait before read");
    try {
      probe::cp_async_read_before_wait(newest_group_only);
      ADD_FAILURE() << "reading a cp.async destination before its wait was not reported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("probe_missing_wait_kernel"), std::string::npos)
          << e.what();
    }
  }
}

// --- Packing: against rounding computed here in float64 (see test_fragment_layout.cpp for the
// host conversions themselves).
double round_to(double v, Input input) {
  const int precision = input == Input::bf16 ? 8 : 11;
  const int emin = input == Input::bf16 ? -126 : -14;
  const int emax = input == Input::bf16 ? 127 : 15;
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e = 0;
  std::frexp(v, &e);
  const int quantum = std::max(e - 1, emin) - (precision - 1);
  const double r = std::ldexp(std::nearbyint(std::ldexp(v, -quantum)), quantum);
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - precision), emax);
  return std::fabs(r) > largest ? std::copysign(INFINITY, v) : r;
}

TEST(CudaIntrinsics, PackRoundsToNearestEvenLowHalfFirst) {
  BRAID_REQUIRE_DEVICE();
  std::vector<float> values = {1.0f,        -2.0f,         1.00390625f,   1.01171875f, 65504.0f,
                               65520.0f,    0x1p-25f,      0x1.8p-24f,    -0.0f,       0.0f,
                               3.0e38f,     -3.4e38f,      INFINITY,      -INFINITY,   0x1p-130f,
                               0x1.8p-133f, 1.0009765625f, 1.0029296875f, NAN,         -1.5f};
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int i = 0; i < 4096; ++i) values.push_back(normal(rng));
  for (Input input : {Input::bf16, Input::f16}) {
    SCOPED_TRACE(input == Input::bf16 ? "bf16" : "f16");
    const std::vector<uint32_t> got = probe::pack_pairs(input, values);
    ASSERT_EQ(got.size(), values.size() / 2);
    for (size_t i = 0; i < got.size(); ++i) {
      for (int half = 0; half < 2; ++half) {
        const float x = values[2 * i + half];
        const double value = decode(static_cast<uint16_t>(got[i] >> (16 * half)), input);
        if (std::isnan(x)) {
          EXPECT_TRUE(std::isnan(value)) << "pair " << i;
        } else {
          const double want = round_to(x, input);
          EXPECT_TRUE(value == want && std::signbit(value) == std::signbit(want))
              << "pair " << i << " half " << half << ": " << x << " packed as " << value
              << ", want " << want;
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_INTRINSICS_PROBE
