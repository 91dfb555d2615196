// ReadyGradSquares: gradient squares recorded by grad-ready hooks equal a separate pass.
#include "braid/optim/ready_grad_squares.h"

#include "braid/nn/gpt.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/matmul.h"
#include "braid/ops/reduce.h"
#include "braid/optim/clip.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// a is used twice (as a tied weight is), b once; the tests' third parameter, c, not at all.
Tensor loss_of(const Tensor& a, const Tensor& b, uint64_t seed) {
  const Tensor x = randn({5, 3}, seed);
  return sum(mul(matmul(matmul(x, a), b), matmul(x, a)));
}

struct Params {
  Tensor a = randn({3, 4}, 1).set_requires_grad(true);
  Tensor b = randn({4, 4}, 2).set_requires_grad(true);
  Tensor c = randn({2}, 3).set_requires_grad(true);
};

TEST(ReadyGradSquares, RecordsTheFinalGradientOfEachParameter) {
  Params p;
  optim::ReadyGradSquares ready({p.a, p.b, p.c});
  ready.begin_backward(true);
  loss_of(p.a, p.b, 7).backward();
  ASSERT_TRUE(ready.recorded(p.a).has_value());
  ASSERT_TRUE(ready.recorded(p.b).has_value());
  EXPECT_EQ(*ready.recorded(p.a), sum_of_squares(p.a.grad()));
  EXPECT_EQ(*ready.recorded(p.b), sum_of_squares(p.b.grad()));
  EXPECT_GT(*ready.recorded(p.a), 0.0);
  EXPECT_FALSE(ready.recorded(p.c).has_value());            // no gradient
  EXPECT_FALSE(ready.recorded(randn({2}, 4)).has_value());  // not tracked
  // The next backward starts afresh.
  ready.begin_backward(true);
  EXPECT_FALSE(ready.recorded(p.a).has_value());
}

// Gradients accumulate over micro-batches: only the last backward's hooks record, and what
// they record is the accumulated gradient, not that backward's share.
TEST(ReadyGradSquares, OnlyTheLastMicroBatchRecordsTheAccumulatedGradient) {
  Params p;
  optim::ReadyGradSquares ready({p.a, p.b, p.c});
  ready.begin_backward(false);
  loss_of(p.a, p.b, 7).backward();
  EXPECT_FALSE(ready.recorded(p.a).has_value());
  const double first_share = sum_of_squares(p.a.grad());
  ready.begin_backward(true);
  loss_of(p.a, p.b, 8).backward();
  ASSERT_TRUE(ready.recorded(p.a).has_value());
  EXPECT_EQ(*ready.recorded(p.a), sum_of_squares(p.a.grad()));
  EXPECT_NE(*ready.recorded(p.a), first_share);
  // grad_sum_of_squares takes the record, and computes what was not recorded.
  EXPECT_EQ(optim::grad_sum_of_squares(p.b, &ready), sum_of_squares(p.b.grad()));
  p.c.set_grad(randn({2}, 9));
  EXPECT_EQ(optim::grad_sum_of_squares(p.c, &ready), sum_of_squares(p.c.grad()));
}

TEST(ReadyGradSquares, ClipOfAGptEqualsASeparatePassBitwise) {
  for (const bool recompute : {false, true}) {
    nn::GptConfig cfg;
    cfg.vocab_size = 50;
    cfg.padded_vocab_multiple = 16;
    cfg.n_layer = 2;
    cfg.n_head = 2;
    cfg.n_embd = 16;
    cfg.block_size = 8;
    cfg.recompute = recompute;
    nn::Gpt model(cfg);
    model.init_weights(5);
    const std::vector<Tensor> params = model.parameters();
    optim::ReadyGradSquares ready(params);
    ready.begin_backward(true);
    model.loss(random_ids({2, 8}, 50, 1), random_ids({2, 8}, 50, 2)).backward();
    for (const Tensor& t : params) EXPECT_TRUE(ready.recorded(t).has_value()) << t.name();
    const optim::ClipResult with = optim::clip_coefficient(params, 0.5f, &ready);
    const optim::ClipResult without = optim::clip_coefficient(params, 0.5f);
    EXPECT_EQ(with.norm, without.norm) << "recompute " << recompute;
    EXPECT_EQ(with.scale, without.scale);
  }
}

TEST(ReadyGradSquares, HooksOutliveTheTrackerHarmlessly) {
  Params p;
  {
    optim::ReadyGradSquares gone({p.a, p.b});
    gone.begin_backward(true);
  }
  loss_of(p.a, p.b, 7).backward();  // the hooks fire into a tracker that is gone
  EXPECT_TRUE(p.a.grad().defined());
}

TEST(ReadyGradSquares, AParameterListedTwiceIsAnError) {
  Params p;
  EXPECT_ERROR_CONTAINS(optim::ReadyGradSquares({p.a, p.b, p.a}), "listed twice");
}

}  // namespace
}  // namespace braid::testing
