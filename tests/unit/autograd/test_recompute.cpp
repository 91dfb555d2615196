// Activation checkpointing: recompute(fn, inputs) must give bit-identical gradients to running fn
// directly, for parameters used inside fn too, and a GPT with recompute must equal one without.
#include "braid/autograd/engine.h"
#include "braid/autograd/grad_mode.h"
#include "braid/core/allocator.h"
#include "braid/nn/gpt.h"
#include "braid/ops.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

using autograd::recompute;

// Fills every parameter of `m` with distinct random values (modules start zero-initialised).
void randomize(nn::Module& m, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    Tensor dst = p.detach();
    dst.copy_(randn(p.shape(), seed++, 0.3f));
  }
}

struct Mlp {
  Tensor w1 = randn({8, 4}, 100, 0.5f).set_requires_grad(true);
  Tensor b1 = randn({8}, 101, 0.5f).set_requires_grad(true);
  Tensor w2 = randn({4, 8}, 102, 0.5f).set_requires_grad(true);
  std::vector<Tensor> params() const { return {w1, b1, w2}; }
  Tensor forward(const Tensor& x) const { return linear(gelu(linear(x, w1, b1)), w2); }
};

TEST(Recompute, MlpGradientsBitwiseEqual) {
  Mlp plain, checkpointed;  // identical values: same seeds
  Tensor x0 = randn({2, 3, 4}, 103).set_requires_grad(true);
  Tensor x1 = x0.detach().clone().set_requires_grad(true);
  Tensor g = randn({2, 3, 4}, 104);

  Tensor y0 = plain.forward(x0);
  y0.backward(g);

  Tensor y1 = recompute(
      [&checkpointed](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{checkpointed.forward(in[0])};
      },
      {x1})[0];
  EXPECT_TRUE(y1.requires_grad());
  y1.backward(g);

  EXPECT_TRUE(bitwise_equal(y0, y1));
  EXPECT_TRUE(bitwise_equal(x0.grad(), x1.grad()));
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(bitwise_equal(plain.params()[i].grad(), checkpointed.params()[i].grad())) << i;
}

TEST(Recompute, BlockGradientsBitwiseEqual) {
  nn::Block plain(16, 2), checkpointed(16, 2);
  randomize(plain, 200);
  randomize(checkpointed, 200);
  Tensor x0 = randn({2, 5, 16}, 210).set_requires_grad(true);
  Tensor x1 = x0.detach().clone().set_requires_grad(true);
  Tensor g = randn({2, 5, 16}, 211);

  plain.forward(x0).backward(g);
  Tensor y1 = recompute(
      [&checkpointed](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{checkpointed.forward(in[0])};
      },
      {x1})[0];
  y1.backward(g);

  EXPECT_TRUE(bitwise_equal(x0.grad(), x1.grad()));
  const auto a = plain.named_parameters(), b = checkpointed.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a[i].second.grad(), b[i].second.grad())) << a[i].first;
}

TEST(Recompute, SeveralInputsAndOutputsSomeUnused) {
  Tensor a0 = randn({3, 4}, 300).set_requires_grad(true),
         b0 = randn({4, 2}, 301).set_requires_grad(true);
  Tensor a1 = a0.detach().clone().set_requires_grad(true),
         b1 = b0.detach().clone().set_requires_grad(true);
  Tensor c = randn({3, 2}, 302);  // an input that needs no gradient
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor m = add(matmul(in[0], in[1]), in[2]);
    std::vector<Tensor> parts = split(m, {1, 1}, 1);
    return std::vector<Tensor>{gelu(parts[0]), parts[1], sum(in[0])};
  };
  Tensor g = randn({3, 1}, 303);
  // Only the first output reaches the loss.
  fn({a0, b0, c})[0].backward(g);
  std::vector<Tensor> outs = recompute(fn, {a1, b1, c});
  ASSERT_EQ(outs.size(), 3u);
  outs[0].backward(g);
  EXPECT_TRUE(bitwise_equal(a0.grad(), a1.grad()));
  EXPECT_TRUE(bitwise_equal(b0.grad(), b1.grad()));
  EXPECT_FALSE(c.grad().defined());
}

// fn may hand an input straight back (a residual passthrough, or contiguous() of a dense input,
// which returns the same handle): the caller's input must stay what it was (here a leaf).
TEST(Recompute, PassthroughOutputLeavesInputUntouched) {
  Tensor x = randn({2, 2}, 350).set_requires_grad(true);
  Tensor y = randn({2, 2}, 351).set_requires_grad(true);
  std::vector<Tensor> outs = recompute(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mul(in[0], in[1]), contiguous(in[1])};
      },
      {x, y});
  EXPECT_TRUE(y.is_leaf());
  EXPECT_FALSE(outs[1].is_leaf());
  sum(add(outs[0], outs[1])).backward();
  // dL/dx = y, dL/dy = x + 1.
  expect_close(x.grad(), to_double(y), 0, 0);
  std::vector<double> expect;
  for (double v : to_double(x)) expect.push_back(static_cast<float>(v + 1));
  expect_close(y.grad(), expect, 0, 0);
  // y is still usable as a leaf afterwards.
  y.set_grad(Tensor());
  sum(scale(y, 2.0f)).backward();
  expect_close(y.grad(), {2, 2, 2, 2}, 0, 0);
}

TEST(Recompute, UnderNoGradJustRuns) {
  Tensor x = randn({2, 4}, 400).set_requires_grad(true);
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> out = recompute(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(in[0])}; }, {x});
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_TRUE(bitwise_equal(out[0], gelu(x)));
}

// Checkpointing keeps only the inputs: after the forward, live memory is the output alone.
TEST(Recompute, ForwardKeepsNoActivations) {
  Mlp mlp;
  Tensor x = randn({64, 4}, 500).set_requires_grad(true);
  const int64_t before = host_memory_stats().current_bytes;
  Tensor y = recompute(
      [&mlp](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp.forward(in[0])}; },
      {x})[0];
  EXPECT_EQ(host_memory_stats().current_bytes - before, static_cast<int64_t>(y.nbytes()));
  Tensor z = mlp.forward(x);  // without checkpointing the hidden [64, 8] activations stay
  EXPECT_GT(host_memory_stats().current_bytes - before,
            static_cast<int64_t>(y.nbytes() + z.nbytes() + 2 * 64 * 8 * sizeof(float) - 1));
}

TEST(Recompute, HooksOfInnerParametersFireOnceWithFinalGradient) {
  Mlp mlp;
  std::vector<int> calls(3, 0);
  std::vector<Tensor> seen(3);
  std::vector<Tensor> params = mlp.params();
  for (size_t i = 0; i < params.size(); ++i)
    params[i].add_grad_ready_hook([&calls, &seen, i](Tensor& p) {
      ++calls[i];
      seen[i] = p.grad().clone();
    });
  Tensor x = randn({3, 4}, 600).set_requires_grad(true);
  Tensor y = recompute(
      [&mlp](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp.forward(in[0])}; },
      {x})[0];
  sum(y).backward();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_TRUE(bitwise_equal(seen[i], params[i].grad())) << i;
  }
}

// KNOWN BUG, reported, disabled until fixed: a parameter used both inside a recompute segment
// and outside it (or in two segments) gets its grad-ready hook fired twice, the first time with
// a partial gradient. The re-run's nested backward treats the parameter's accumulator as final
// although the outer pass still owes it a contribution, so data-parallel overlap would reduce a
// partial gradient. GPT is not affected (its tied embedding is used outside the blocks only).
TEST(Recompute, HookOfParameterUsedInsideAndOutsideFiresOnce) {
  Tensor w = randn({2, 2}, 800).set_requires_grad(true);
  int calls = 0;
  Tensor seen;
  w.add_grad_ready_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().clone();
  });
  Tensor x = randn({3, 2}, 801).set_requires_grad(true);
  Tensor h = recompute(
      [&w](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0], w)}; },
      {x})[0];
  sum(gelu(linear(h, w))).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(bitwise_equal(seen, w.grad()));
}

// One parameter in three segments, one nested in another: one hook call, with the full
// gradient, bitwise equal to the same graph without recompute.
TEST(Recompute, ParameterSharedAcrossNestedSegmentsFiresOnceWithTheFullGradient) {
  Tensor w = randn({2, 2}, 810).set_requires_grad(true);
  Tensor x = randn({3, 2}, 811).set_requires_grad(true);
  auto layer = [&w](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(linear(in[0], w))};
  };
  int calls = 0;
  Tensor seen;
  w.add_grad_ready_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().clone();
  });
  auto outer = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{layer({recompute(layer, in)[0]})[0]};
  };
  Tensor y = recompute(outer, {x})[0];
  sum(recompute(layer, {y})[0]).backward();
  EXPECT_EQ(calls, 1);
  // Three uses of w now (two nested + one more segment): compare against that plain graph.
  w.set_grad({});
  calls = 0;
  {
    Tensor plain = layer({layer({layer({x})[0]})[0]})[0];
    sum(plain).backward();
  }
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(bitwise_equal(seen, w.grad()));
}

nn::GptConfig tiny_config(bool recompute_blocks) {
  nn::GptConfig c;
  c.vocab_size = 50;
  c.padded_vocab_multiple = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 12;
  c.recompute = recompute_blocks;
  return c;
}

TEST(Recompute, GptWithRecomputeEqualsWithout) {
  nn::Gpt plain(tiny_config(false)), checkpointed(tiny_config(true));
  plain.init_weights(7);
  checkpointed.init_weights(7);
  std::map<std::string, int> hook_calls;
  for (auto& [name, p] : checkpointed.named_parameters())
    p.add_grad_ready_hook([&hook_calls, n = name](Tensor&) { ++hook_calls[n]; });

  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    Tensor ids = random_ids({2, 10}, 50, 700 + step), targets = random_ids({2, 10}, 50, 710 + step);
    Tensor l0 = plain.loss(ids, targets), l1 = checkpointed.loss(ids, targets);
    EXPECT_EQ(l0.item(), l1.item());
    l0.backward();
    l1.backward();
    const auto a = plain.named_parameters(), b = checkpointed.named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i].second.grad().defined()) << a[i].first;
      EXPECT_TRUE(bitwise_equal(a[i].second.grad(), b[i].second.grad())) << a[i].first;
      EXPECT_EQ(hook_calls[b[i].first], step + 1) << b[i].first;
    }
  }
}

}  // namespace
}  // namespace braid::testing
