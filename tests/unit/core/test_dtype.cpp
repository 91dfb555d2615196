// DType metadata and the bf16/f16 conversions: exhaustive round trips and round-to-nearest-even
// at every midpoint, subnormals, overflow to infinity and NaN.
#include <bit>
#include <cmath>
#include <limits>

#include "braid/core/dtype.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

float from_bits(uint32_t b) {
  return std::bit_cast<float>(b);
}
uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}

TEST(DType, SizesNamesAndKinds) {
  const std::vector<std::pair<DType, size_t>> sizes{{DType::f32, 4}, {DType::bf16, 2},
                                                    {DType::f16, 2}, {DType::i32, 4},
                                                    {DType::i64, 8}, {DType::u8, 1}};
  for (auto [t, size] : sizes) {
    EXPECT_EQ(dtype_size(t), size);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_TRUE(is_floating(DType::f32));
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::u8));
  EXPECT_ERROR_CONTAINS(dtype_from_name("f8"), "unknown dtype 'f8'");
}

// ---- bf16 --------------------------------------------------------------------------------------

TEST(Bf16, EveryValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
  }
}

// Between adjacent bf16 values a < b (bit patterns h, h + 1) the f32 with bits (h << 16) | 0x8000
// is the exact midpoint: it must go to the even pattern, its neighbours to the nearer value.
TEST(Bf16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t h = 0; h < 0x7f80; ++h) {  // every finite non-negative value, incl. subnormals
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint32_t mid = ((sign | h) << 16) | 0x8000u;
      const uint16_t even = static_cast<uint16_t>(sign | ((h & 1) ? h + 1 : h));
      ASSERT_EQ(f32_to_bf16(from_bits(mid)), even) << std::hex << h;
      ASSERT_EQ(f32_to_bf16(from_bits(mid - 1)), sign | h) << std::hex << h;
      ASSERT_EQ(f32_to_bf16(from_bits(mid + 1)), sign | (h + 1)) << std::hex << h;
    }
  }
}

TEST(Bf16, ChosenValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie, 0x3f80 is even: down
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, 0x3f81 is odd: up
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(0x1p-149f), 0x0000);  // the smallest f32 subnormal rounds to zero
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormal tie to even (up)
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000)), 0x0000);  // subnormal tie to even (down)
  // Overflow: FLT_MAX is above the largest bf16 plus half an ulp, so it becomes +inf.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f7fff)), 0x7f7f);  // just below the midpoint: max bf16
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
}

TEST(Bf16, NanStaysNanAndQuiet) {
  // Payloads in the low 16 bits only would round to infinity if NaN were not special-cased.
  for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fffffffu}) {
    const uint16_t h = f32_to_bf16(from_bits(bits));
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << bits;
    EXPECT_TRUE(h & 0x0040) << "quiet bit " << std::hex << bits;
    EXPECT_EQ(h & 0x8000, (bits >> 16) & 0x8000) << "sign " << std::hex << bits;
  }
}

// ---- f16 ---------------------------------------------------------------------------------------

TEST(F16, EveryValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(F16, DecodesExactly) {
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);  // smallest normal
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

// Midpoints of adjacent f16 values are exact f32 numbers (12 significant bits suffice); at each
// the conversion must pick the even pattern and the f32 neighbours the nearer value. The last
// pair, 65504 and the first value past it (65536, i.e. infinity), checks overflow rounding.
TEST(F16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double a = f16_to_f32(static_cast<uint16_t>(h));
    const double b = h + 1 == 0x7c00 ? 65536.0 : f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((a + b) / 2);
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const uint16_t even = static_cast<uint16_t>((h & 1) ? h + 1 : h);
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(f32_to_f16(s * mid), sign | even) << std::hex << h;
      ASSERT_EQ(f32_to_f16(s * std::nextafter(mid, 0.0f)), sign | h) << std::hex << h;
      ASSERT_EQ(f32_to_f16(s * std::nextafter(mid, INFINITY)), sign | (h + 1)) << std::hex << h;
    }
  }
}

TEST(F16, ChosenValues) {
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      // tie to even: down
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie to even: up
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);             // below the overflow midpoint
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);             // the midpoint rounds to even: inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 subnormal units
  EXPECT_EQ(f32_to_f16(0x1p-30f), 0x0000);      // underflow
  EXPECT_EQ(f32_to_f16(-0x1p-30f), 0x8000);     // keeps the sign of zero
  EXPECT_EQ(f32_to_f16(0x1p-149f), 0x0000);
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-14f, 0.0f)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  const uint16_t nan = f32_to_f16(from_bits(0x7f800001u));
  EXPECT_TRUE(std::isnan(f16_to_f32(nan)));
  EXPECT_EQ(f32_to_f16(-NAN) & 0x8000, 0x8000);
}

}  // namespace
}  // namespace braid::testing
