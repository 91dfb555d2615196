// The backward engine: shared inputs, diamonds, unused outputs, several roots, accumulation
// across passes, grad-ready hooks, no_grad, error cases and freeing of saved tensors.
#include <memory>

#include "braid/autograd/engine.h"
#include "braid/autograd/grad_mode.h"
#include "braid/core/allocator.h"
#include "braid/ops.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

using autograd::GradModeGuard;
using autograd::NoGradGuard;

std::vector<double> values(const Tensor& t) {
  return to_double(t);
}

TEST(Engine, SharedInputAccumulates) {
  // y = x * x + x: x reaches the loss through three edges; dy/dx = 2x + 1.
  Tensor x = randn({5}, 1).set_requires_grad(true);
  Tensor y = add(mul(x, x), x);
  y.backward(Tensor::full({5}, 1.0f));
  std::vector<double> expect;
  for (double v : values(x)) expect.push_back(2 * v + 1);
  expect_close(x.grad(), expect, 1e-6, 1e-6);
}

TEST(Engine, DiamondGraph) {
  // h = 3x feeds two branches that meet again: L = sum(h * h) + sum(2h); dL/dx = 3 (2h + 2).
  Tensor x = randn({2, 3}, 2).set_requires_grad(true);
  Tensor h = scale(x, 3.0f);
  Tensor left = sum(mul(h, h));
  Tensor right = sum(scale(h, 2.0f));
  add(left, right).backward();
  std::vector<double> expect;
  for (double v : values(x)) expect.push_back(3.0 * (2.0 * 3.0 * v + 2.0));
  expect_close(x.grad(), expect, 1e-6, 1e-6);
}

TEST(Engine, UnusedSplitOutputGetsZeroGradient) {
  Tensor x = randn({2, 6}, 3).set_requires_grad(true);
  std::vector<Tensor> parts = split(x, {2, 1, 3}, 1);
  sum(scale(parts[2], 5.0f)).backward();  // parts 0 and 1 never reach the loss
  const std::vector<double> g = values(x.grad());
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(g[r * 6 + j], j >= 3 ? 5.0 : 0.0) << r << "," << j;
}

// Several roots sharing one node (two outputs of one split) must each count once: the leaf's
// accumulator runs only when every dependency is satisfied.
TEST(Engine, SeveralRootsFromOneNode) {
  Tensor x = randn({2, 5}, 4).set_requires_grad(true);
  std::vector<Tensor> parts = split(x, {2, 1, 2}, 1);
  Tensor g0 = randn({2, 2}, 5), g2 = randn({2, 2}, 6);
  autograd::backward({parts[0], parts[2]}, {g0, g2});
  ASSERT_TRUE(x.grad().defined());
  const std::vector<double> a = values(g0), b = values(g2), g = values(x.grad());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(g[r * 5 + 0], a[r * 2 + 0]);
    EXPECT_EQ(g[r * 5 + 1], a[r * 2 + 1]);
    EXPECT_EQ(g[r * 5 + 2], 0.0);
    EXPECT_EQ(g[r * 5 + 3], b[r * 2 + 0]);
    EXPECT_EQ(g[r * 5 + 4], b[r * 2 + 1]);
  }
}

TEST(Engine, SameRootTwiceSumsItsGradients) {
  Tensor x = randn({3}, 7).set_requires_grad(true);
  Tensor y = scale(x, 2.0f);
  autograd::backward({y, y}, {Tensor::full({3}, 1.0f), Tensor::full({3}, 0.5f)});
  expect_close(x.grad(), {3.0, 3.0, 3.0}, 0, 0);
}

TEST(Engine, RootReachableFromAnotherRoot) {
  // Roots y and z = 2y: y's node must wait for z's contribution.
  Tensor x = randn({3}, 8).set_requires_grad(true);
  Tensor y = scale(x, 3.0f);
  Tensor z = scale(y, 2.0f);
  autograd::backward({y, z}, {Tensor::full({3}, 1.0f), Tensor::full({3}, 1.0f)});
  expect_close(x.grad(), {9.0, 9.0, 9.0}, 0, 0);  // 3 * (1 + 2)
}

TEST(Engine, LeafAsRoot) {
  Tensor x = randn({2, 2}, 9).set_requires_grad(true);
  Tensor g = randn({2, 2}, 10);
  x.backward(g);
  EXPECT_TRUE(bitwise_equal(x.grad(), g));
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = randn({4}, 11).set_requires_grad(true);
  Tensor w = randn({4}, 12);
  sum(mul(x, w)).backward();
  Tensor first = x.grad().clone();
  sum(mul(x, w)).backward();
  std::vector<double> expect;
  for (double v : values(first)) expect.push_back(2 * v);
  expect_close(x.grad(), expect, 0, 0);  // w + w is exact in fp32
}

// A .grad set to a view into a flat buffer (data-parallel buckets) is accumulated in place.
TEST(Engine, AccumulatesInPlaceIntoExistingGradBuffer) {
  Tensor bucket = Tensor::zeros({10});
  Tensor x = randn({2, 3}, 13).set_requires_grad(true);
  Tensor view = bucket.narrow(0, 2, 6).reshape({2, 3});
  x.set_grad(view);
  Tensor g = randn({2, 3}, 14);
  x.backward(g);
  x.backward(g);
  EXPECT_TRUE(x.grad().same(view));
  const std::vector<double> b = values(bucket), gv = values(g);
  EXPECT_EQ(b[0], 0.0);
  EXPECT_EQ(b[1], 0.0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b[2 + i], static_cast<float>(gv[i] + gv[i]));
  EXPECT_EQ(b[8], 0.0);
  EXPECT_EQ(b[9], 0.0);
}

// Linear and embedding add their weight gradients straight into an existing .grad (here views
// into one bucket, as data parallelism sets them): the values are those the engine's own
// accumulation gives, the views stay in place, and each grad-ready hook fires once after every
// contribution (the tied table gets two). Inside a recompute segment the replay's captured
// gradients still go back to the outer pass.
TEST(Engine, WeightGradientsAddStraightIntoAnExistingGrad) {
  Tensor table = randn({6, 4}, 30, 0.5f).set_requires_grad(true);
  Tensor w = randn({4, 4}, 31, 0.5f).set_requires_grad(true);
  Tensor bias = randn({4}, 32).set_requires_grad(true);
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 4, 1, 0, 5}, {5});
  const Tensor coeff = randn({5, 6}, 33);
  auto block = [&](const Tensor& e) { return gelu(linear(e, w, bias)); };
  auto loss = [&](bool recompute) {
    const Tensor e = embedding(table, ids);
    const Tensor h =
        recompute
            ? autograd::recompute(
                  [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{block(in[0])}; },
                  {e})[0]
            : block(e);
    return sum(mul(linear(h, table), coeff));
  };
  std::vector<Tensor> params{table, w, bias};
  loss(false).backward();  // no .grad yet: the engine's path gives the reference
  std::vector<std::vector<double>> reference;
  for (const Tensor& p : params) reference.push_back(values(p.grad()));

  std::vector<int> calls(params.size(), 0);
  std::vector<Tensor> seen(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    params[i].add_grad_ready_hook([&calls, &seen, i](Tensor& t) {
      ++calls[i];
      seen[i] = t.grad().clone();
    });
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute" : "plain");
    Tensor bucket = Tensor::full({24 + 16 + 4}, 0.5f);
    std::vector<Tensor> views;
    int64_t offset = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor& p = params[i];
      views.push_back(bucket.narrow(0, offset, p.numel()).reshape(p.shape()));
      offset += p.numel();
      p.set_grad(views.back());
      calls[i] = 0;
      seen[i] = Tensor();
    }
    loss(recompute).backward();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(params[i].grad().same(views[i])) << i;
      std::vector<double> expect;
      for (double v : reference[i]) expect.push_back(0.5 + v);
      expect_close(params[i].grad(), expect, 1e-6, 1e-6);
      EXPECT_EQ(calls[i], 1) << i;
      ASSERT_TRUE(seen[i].defined());
      EXPECT_TRUE(bitwise_equal(seen[i], params[i].grad())) << i;
    }
  }
}

// The first gradient stored in .grad is a private copy: later in-place accumulation must not
// write into a tensor the graph shares with another input's gradient (Add passes g through).
TEST(Engine, FirstGradIsNotAliasedWithOtherGradients) {
  Tensor a = randn({3}, 15).set_requires_grad(true);
  Tensor b = randn({3}, 16).set_requires_grad(true);
  Tensor g = randn({3}, 17);
  add(a, b).backward(g);
  EXPECT_NE(a.grad().storage(), b.grad().storage());
  EXPECT_NE(a.grad().storage(), g.storage());
  add(a, b).backward(g);
  std::vector<double> expect;
  for (double v : values(g)) expect.push_back(static_cast<float>(v + v));
  expect_close(a.grad(), expect, 0, 0);
  expect_close(b.grad(), expect, 0, 0);
  expect_close(g, values(g), 0, 0);
}

TEST(Hooks, FireOnceAfterAllContributions) {
  // w is used in two matmuls; its hook must fire once, after both contributions are summed.
  Tensor w = randn({3, 2}, 20).set_requires_grad(true);
  Tensor x1 = randn({4, 3}, 21), x2 = randn({5, 3}, 22);
  int calls = 0;
  Tensor seen;
  w.add_grad_ready_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().clone();
  });
  Tensor loss = add(sum(gelu(matmul(x1, w))), sum(matmul(x2, w)));
  loss.backward();
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(seen.defined());
  EXPECT_TRUE(bitwise_equal(seen, w.grad()));
  // A second pass fires again, once, and sees the accumulated gradient.
  add(sum(gelu(matmul(x1, w))), sum(matmul(x2, w))).backward();
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(bitwise_equal(seen, w.grad()));
}

TEST(Hooks, EveryParameterOfAModelFiresOncePerPass) {
  Tensor w1 = randn({4, 4}, 30).set_requires_grad(true);
  Tensor b1 = randn({4}, 31).set_requires_grad(true);
  Tensor w2 = randn({2, 4}, 32).set_requires_grad(true);
  std::vector<Tensor> params{w1, b1, w2};
  std::vector<int> calls(3, 0);
  std::vector<Tensor> seen(3);
  for (size_t i = 0; i < params.size(); ++i)
    params[i].add_grad_ready_hook([&calls, &seen, i](Tensor& p) {
      ++calls[i];
      seen[i] = p.grad().clone();
    });
  Tensor x = randn({5, 4}, 33);
  // w1 and b1 are used twice (the second time w1 through a transposed view), w2 once.
  Tensor h1 = gelu(linear(x, w1, b1));
  Tensor h = gelu(linear(h1, transpose(w1, 0, 1), b1));
  sum(linear(h, w2)).backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(calls[i], 1) << "param " << i;
    EXPECT_TRUE(bitwise_equal(seen[i], params[i].grad())) << "param " << i;
  }
}

TEST(Hooks, OnlyOnLeaves) {
  Tensor x = randn({2}, 40).set_requires_grad(true);
  Tensor y = scale(x, 2.0f);
  EXPECT_ERROR_CONTAINS(y.add_grad_ready_hook([](Tensor&) {}), "leaf");
}

TEST(GradMode, NoGradRecordsNothing) {
  Tensor x = randn({3, 3}, 50).set_requires_grad(true);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(autograd::GradMode::is_enabled());
    for (Tensor y : {add(x, x), mul(x, x), matmul(x, x), gelu(x), softmax(x), transpose(x, 0, 1),
                     reshape(x, {9}), narrow(x, 0, 0, 1), sum(x), linear(x, x)}) {
      EXPECT_FALSE(y.requires_grad());
      EXPECT_FALSE(y.grad_fn());
    }
    {
      GradModeGuard enable(true);  // nested guards restore in order
      EXPECT_TRUE(add(x, x).requires_grad());
    }
    EXPECT_FALSE(autograd::GradMode::is_enabled());
  }
  EXPECT_TRUE(autograd::GradMode::is_enabled());
  EXPECT_TRUE(add(x, x).requires_grad());
}

TEST(Errors, BackwardWithoutGradThrows) {
  Tensor x = randn({3}, 60);
  EXPECT_ERROR_CONTAINS(sum(x).backward(), "does not require grad");
  Tensor w = randn({3}, 61).set_requires_grad(true);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = sum(w);
  }
  EXPECT_ERROR_CONTAINS(y.backward(), "does not require grad");
  EXPECT_ERROR_CONTAINS(scale(w, 2.0f).backward(), "needs an explicit gradient");
  EXPECT_ERROR_CONTAINS(scale(w, 2.0f).backward(Tensor::zeros({4})), "does not match root");
  EXPECT_ERROR_CONTAINS(autograd::backward({sum(w)}, {}), "1 roots but 0 gradients");
}

TEST(Errors, SecondBackwardThroughFreedGraphThrows) {
  Tensor w = randn({3}, 62).set_requires_grad(true);
  Tensor loss = sum(gelu(w));
  loss.backward();
  EXPECT_ERROR_CONTAINS(loss.backward(), "a second time");
}

TEST(Errors, RequiresGradOnlyOnFloatLeaves) {
  EXPECT_ERROR_CONTAINS(Tensor::zeros({2}, DType::i32).set_requires_grad(true), "only floating");
  Tensor w = randn({3}, 63).set_requires_grad(true);
  Tensor y = scale(w, 2.0f);
  EXPECT_ERROR_CONTAINS(y.set_requires_grad(false), "non-leaf");
}

// Saved activations are released as soon as their node has run, not when the graph dies.
TEST(Memory, SavedTensorsFreedByBackward) {
  Tensor a = randn({8, 16}, 70).set_requires_grad(true);
  Tensor b = randn({16, 32}, 71);
  Tensor h = matmul(a, b);
  std::weak_ptr<Storage> h_storage = h.storage();
  Tensor loss = sum(gelu(h));  // gelu saves its input h
  h = Tensor();
  EXPECT_FALSE(h_storage.expired()) << "gelu should hold its saved input until backward";
  loss.backward();
  EXPECT_TRUE(h_storage.expired()) << "backward kept a saved activation alive";
}

TEST(Memory, LiveBytesReturnToParametersPlusGradients) {
  const int64_t before = host_memory_stats().current_bytes;
  {
    Tensor w = randn({32, 64}, 72).set_requires_grad(true);
    Tensor x = randn({16, 64}, 73);
    const int64_t params = host_memory_stats().current_bytes;
    Tensor loss =
        mean(gelu(layer_norm(linear(x, w), Tensor::full({32}, 1.0f), Tensor::zeros({32}))));
    loss.backward();
    // What stays: w, x, w.grad and the scalar loss. Every activation and saved tensor is gone
    // although the (now empty) graph is still reachable from `loss`.
    EXPECT_EQ(host_memory_stats().current_bytes - params,
              static_cast<int64_t>(w.grad().nbytes() + loss.nbytes()));
  }
  EXPECT_EQ(host_memory_stats().current_bytes, before);
}

}  // namespace
}  // namespace braid::testing
