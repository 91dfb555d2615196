// Counter-based RNG: Philox known answers, determinism, draw statistics, the name hash, and
// layout-independent initialisation (a shard generates exactly its slice of the full tensor).
#include <cmath>

#include "braid/core/generator.h"
#include "braid/nn/init.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// Random123's published known-answer vectors for Philox4x32-10 (tests/kat_vectors).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// FNV-1a 64-bit reference values.
TEST(StableHash, Fnv1aReference) {
  EXPECT_EQ(stable_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(stable_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(stable_hash("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(stable_hash("blocks.0.attn.qkv.weight"), stable_hash("blocks.1.attn.qkv.weight"));
}

TEST(Generator, PureFunctionOfSeedStreamIndex) {
  for (uint64_t i : {0ull, 1ull, 12345ull, (1ull << 40) + 7}) {
    EXPECT_EQ(normal_at(1, 2, i), normal_at(1, 2, i));
    EXPECT_EQ(uniform_at(1, 2, i), uniform_at(1, 2, i));
    EXPECT_NE(normal_at(1, 2, i), normal_at(2, 2, i));
    EXPECT_NE(normal_at(1, 2, i), normal_at(1, 3, i));
    EXPECT_NE(normal_at(1, 2, i), normal_at(1, 2, i + 1));
  }
  // The high half of the index matters too (tensors beyond 2^32 elements).
  EXPECT_NE(uniform_at(5, 0, 3), uniform_at(5, 0, 3 + (1ull << 32)));
  // And the high half of the stream.
  EXPECT_NE(uniform_at(5, 1, 3), uniform_at(5, 1 + (1ull << 32), 3));
}

// Bounds are five standard errors of each statistic over n = 100000 draws, so a correct
// generator fails with probability < 1e-6 (and the draws are fixed, so never flakily):
//   mean of N(0,1): sd 1/sqrt(n) = 0.0032 -> 0.016;  variance: sd sqrt(2/n) = 0.0045 -> 0.022
//   P(|x| < 1) = 0.6827: sd sqrt(p(1-p)/n) = 0.0015 -> 0.0074
//   fourth moment 3: sd sqrt((105 - 9)/n) = 0.031 -> 0.155
//   uniform mean 0.5: sd sqrt(1/12/n) = 0.00091 -> 0.0046;  uniform variance 1/12: sd
//   sqrt((1/80 - 1/144)/n) = 0.00024 -> 0.0012
TEST(Generator, NormalAndUniformStatistics) {
  const int n = 100000;
  double s = 0, s2 = 0, s4 = 0, within = 0, us = 0, us2 = 0;
  float umin = 1, umax = 0;
  for (int i = 0; i < n; ++i) {
    const double x = normal_at(42, 7, i);
    ASSERT_TRUE(std::isfinite(x));
    s += x;
    s2 += x * x;
    s4 += x * x * x * x;
    within += std::abs(x) < 1.0;
    const float u = uniform_at(42, 8, i);
    umin = std::min(umin, u);
    umax = std::max(umax, u);
    us += u;
    us2 += static_cast<double>(u) * u;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.016);
  EXPECT_NEAR(var, 1.0, 0.022);
  EXPECT_NEAR(within / n, 0.6827, 0.0074);
  EXPECT_NEAR(s4 / n, 3.0, 0.155);
  EXPECT_GT(umin, 0.0f);  // open interval: log(u) in Box-Muller never sees 0
  EXPECT_LT(umax, 1.0f);
  const double umean = us / n;
  EXPECT_NEAR(umean, 0.5, 0.0046);
  EXPECT_NEAR(us2 / n - umean * umean, 1.0 / 12.0, 0.0012);
}

TEST(Init, NormalIsLayoutIndependent) {
  const Shape global{6, 10};
  Tensor full = Tensor::empty(global);
  nn::init::normal_(full, 11, "blocks.0.mlp.fc.weight", 0.02f);
  // A [3, 4] block at rows 2..4, columns 5..8 fills exactly that slice of the full tensor.
  Tensor shard = Tensor::empty({3, 4});
  nn::init::normal_(shard, 11, "blocks.0.mlp.fc.weight", 0.02f,
                    nn::ShardSpec::box(global, {2, 5}, {3, 4}));
  EXPECT_TRUE(bitwise_equal(shard, full.narrow(0, 2, 3).narrow(1, 5, 4)));
  // Column shards (tensor parallel) tile the full tensor.
  for (int64_t c0 = 0; c0 < 10; c0 += 5) {
    Tensor col = Tensor::empty({6, 5});
    nn::init::normal_(col, 11, "blocks.0.mlp.fc.weight", 0.02f,
                      nn::ShardSpec::split(global, 1, 2, static_cast<int>(c0 / 5)));
    EXPECT_TRUE(bitwise_equal(col, full.narrow(1, c0, 5)));
  }
  // Values are std * normal_at(seed, hash(name), global index).
  const std::vector<float> v = full.to_vector();
  EXPECT_EQ(v[37], 0.02f * normal_at(11, stable_hash("blocks.0.mlp.fc.weight"), 37));
}

TEST(Init, ThreeDimensionalSliceAndNames) {
  const Shape global{4, 3, 5};
  Tensor full = Tensor::empty(global);
  nn::init::normal_(full, 3, "w", 1.0f);
  Tensor part = Tensor::empty({2, 3, 2});
  nn::init::normal_(part, 3, "w", 1.0f, nn::ShardSpec::box(global, {1, 0, 3}, {2, 3, 2}));
  EXPECT_TRUE(bitwise_equal(part, full.narrow(0, 1, 2).narrow(2, 3, 2)));
  // Another name is another stream; the std scales exactly.
  Tensor other = Tensor::empty(global), scaled = Tensor::empty(global);
  nn::init::normal_(other, 3, "v", 1.0f);
  nn::init::normal_(scaled, 3, "w", 0.5f);
  EXPECT_NE(other.to_vector(), full.to_vector());
  const std::vector<float> f = full.to_vector(), s = scaled.to_vector();
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(s[i], 0.5f * f[i]) << i;
}

// A fused [q | k | v] weight split by heads: each rank's rows are three separate row blocks
// of the global tensor, described as one box of the weight viewed as [3, C, C].
TEST(Init, GroupedSplitFillsEachGroupsPiece) {
  const int64_t c = 8;
  const Shape global{3 * c, 5};
  Tensor full = Tensor::empty(global);
  nn::init::normal_(full, 7, "qkv", 1.0f);
  for (int r = 0; r < 4; ++r) {
    const nn::ShardSpec spec = nn::ShardSpec::split_groups(global, 0, 3, 4, r);
    EXPECT_EQ(spec.local_shape, (Shape{3 * c / 4, 5}));
    Tensor shard = Tensor::empty(spec.local_shape);
    nn::init::normal_(shard, 7, "qkv", 1.0f, spec);
    for (int g = 0; g < 3; ++g)
      EXPECT_TRUE(bitwise_equal(shard.narrow(0, g * c / 4, c / 4),
                                full.narrow(0, g * c + r * c / 4, c / 4)))
          << "rank " << r << " group " << g;
  }
  EXPECT_ERROR_CONTAINS(nn::ShardSpec::split_groups(global, 0, 3, 3, 0), "3 equal parts");
}

TEST(Init, RejectsBadSlicesAndLayouts) {
  Tensor t = Tensor::empty({2, 3});
  EXPECT_ERROR_CONTAINS(nn::init::normal_(t, 1, "w", 1.0f, nn::ShardSpec::whole({4, 3, 2})),
                        "does not describe");
  EXPECT_ERROR_CONTAINS(nn::ShardSpec::box({4, 3}, {3, 0}, {2, 3}), "leaves the global shape");
  Tensor strided = Tensor::empty({3, 2}).transpose(0, 1);
  EXPECT_ERROR_CONTAINS(nn::init::normal_(strided, 1, "w", 1.0f), "dense f32");
  Tensor c = Tensor::zeros({2, 2});
  nn::init::constant_(c, 3.0f);
  EXPECT_EQ(c.to_vector(), (std::vector<float>{3, 3, 3, 3}));
}

}  // namespace
}  // namespace braid::testing
