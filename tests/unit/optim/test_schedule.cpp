// Learning-rate schedules: linear warmup, cosine decay, constant.
#include <cmath>

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

}  // namespace
}  // namespace braid::testing
