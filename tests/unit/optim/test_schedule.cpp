// Learning-rate schedules (linear warmup, cosine decay, constant) and global-norm clipping.
#include <cmath>

#include "braid/optim/clip.h"
#include "braid/optim/schedule.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

TEST(LrSchedule, WarmupPeakAndCosineEnd) {
  optim::LrSchedule s;
  s.max_lr = 6e-4f;
  s.min_lr = 6e-5f;
  s.warmup_steps = 10;
  s.total_steps = 110;
  // Warmup is linear and reaches max_lr on its last step (step + 1 over warmup_steps).
  EXPECT_FLOAT_EQ(s.at(0), 6e-4f / 10);
  EXPECT_FLOAT_EQ(s.at(4), 6e-4f * 5 / 10);
  EXPECT_FLOAT_EQ(s.at(9), 6e-4f);
  // Cosine from max_lr at the end of warmup to min_lr at total_steps, and min_lr after.
  EXPECT_FLOAT_EQ(s.at(10), 6e-4f);
  EXPECT_FLOAT_EQ(s.at(60), (6e-4f + 6e-5f) / 2);
  const double quarter = 6e-5 + (6e-4 - 6e-5) * 0.5 * (1 + std::cos(M_PI * 0.25));
  EXPECT_FLOAT_EQ(s.at(35), static_cast<float>(quarter));
  EXPECT_FLOAT_EQ(s.at(110), 6e-5f);
  EXPECT_FLOAT_EQ(s.at(500), 6e-5f);
  // Monotone non-increasing after warmup.
  for (int64_t t = 10; t < 120; ++t) EXPECT_LE(s.at(t + 1), s.at(t)) << t;
}

TEST(LrSchedule, ConstantAndNoWarmup) {
  optim::LrSchedule s;
  s.max_lr = 1e-3f;
  s.kind = "constant";
  s.warmup_steps = 4;
  EXPECT_FLOAT_EQ(s.at(1), 0.5e-3f);
  EXPECT_FLOAT_EQ(s.at(4), 1e-3f);
  EXPECT_FLOAT_EQ(s.at(1000), 1e-3f);
  optim::LrSchedule c;
  c.max_lr = 2.0f;
  c.min_lr = 0.0f;
  c.total_steps = 4;
  EXPECT_FLOAT_EQ(c.at(0), 2.0f);  // no warmup: starts at the peak
  EXPECT_FLOAT_EQ(c.at(2), 1.0f);
  EXPECT_NEAR(c.at(4), 0.0f, 1e-7);
  optim::LrSchedule bad;
  bad.kind = "linear";
  EXPECT_ERROR_CONTAINS(bad.at(3), "unknown lr schedule 'linear'");
}

TEST(Clip, NormOverAllParametersAndCoefficient) {
  Tensor a = randn({3, 4}, 1).set_requires_grad(true);
  Tensor b = randn({5}, 2).set_requires_grad(true);
  Tensor c = randn({2}, 3).set_requires_grad(true);  // no gradient: counts as zero
  a.set_grad(randn({3, 4}, 4, 3.0f));
  b.set_grad(randn({5}, 5, 3.0f));
  double squares = 0;
  for (const Tensor& g : {a.grad(), b.grad()})
    for (double v : to_double(g)) squares += v * v;
  const double norm = std::sqrt(squares);
  // The sum of squares accumulates fp32 blocks of <= 256 terms: ~256 * 2^-24 relative at worst.
  const optim::ClipResult r = optim::clip_coefficient({a, b, c}, 1.0f);
  EXPECT_NEAR(r.norm, norm, 2e-5 * norm);
  ASSERT_GT(norm, 1.0);
  EXPECT_FLOAT_EQ(r.scale, static_cast<float>(1.0 / (norm + 1e-6)));
  // Within the limit: no clipping. max_norm <= 0 disables clipping.
  EXPECT_EQ(optim::clip_coefficient({a, b, c}, static_cast<float>(norm * 2)).scale, 1.0f);
  EXPECT_EQ(optim::clip_coefficient({a, b, c}, 0.0f).scale, 1.0f);
  EXPECT_NEAR(optim::clip_coefficient({a, b, c}, 0.0f).norm, norm, 2e-5 * norm);
  // The gradients themselves are not modified.
  EXPECT_EQ(to_double(a.grad()), to_double(randn({3, 4}, 4, 3.0f)));
  // No gradients at all: norm 0, scale 1.
  const optim::ClipResult none = optim::clip_coefficient({c}, 1.0f);
  EXPECT_EQ(none.norm, 0.0);
  EXPECT_EQ(none.scale, 1.0f);
}

TEST(Clip, NonFiniteNormDoesNotClip) {
  Tensor a = randn({2}, 6).set_requires_grad(true);
  a.set_grad(Tensor::from_vector(std::vector<float>{INFINITY, 1.0f}, {2}));
  const optim::ClipResult r = optim::clip_coefficient({a}, 1.0f);
  EXPECT_TRUE(std::isinf(r.norm));
  EXPECT_EQ(r.scale, 1.0f);  // the caller sees the non-finite norm and skips the step
}

}  // namespace
}  // namespace braid::testing
