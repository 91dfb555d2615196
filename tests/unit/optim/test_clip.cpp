// Global-norm gradient clipping (braid/optim/clip.h): the norm over every parameter's gradient,
// the coefficient, and a non-finite norm that leaves the gradients to the step's skip.
#include <cmath>

#include "braid/optim/clip.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

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
