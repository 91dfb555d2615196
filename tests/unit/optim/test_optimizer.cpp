// AdamW and SGD against float64 references of PyTorch's update rules, grad_scale, decay groups,
// zero_grad and the optimizer factory.
#include <cmath>

#include "braid/nn/gpt.h"
#include "braid/optim/optimizer.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// PyTorch's AdamW (torch.optim.AdamW, foreach=False), one parameter, in float64:
//   p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
struct AdamRef {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g, double lr, double wd, double b1, double b2, double eps,
            int t) {
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

// Tolerance: each fp32 step rounds p about twice (decay, update) and m, v once or twice, so
// after k steps the relative error is a few k * 2^-24; 1e-6 relative covers k <= 5 with margin,
// and 1e-9 absolute covers entries that pass near zero.
constexpr double kRtol = 1e-6, kAtol = 1e-9;

TEST(AdamW, OneStepMatchesFloat64Reference) {
  Tensor w = randn({4, 3}, 1).set_requires_grad(true);
  Tensor b = randn({3}, 2).set_requires_grad(true);
  const nn::NamedTensors named{{"w", w}, {"b", b}};
  optim::AdamWOptions opt;  // betas (0.9, 0.95), eps 1e-8
  optim::AdamW adam(optim::decay_groups(named, 0.1f), opt);
  w.set_grad(randn({4, 3}, 3));
  b.set_grad(randn({3}, 4));
  AdamRef rw{to_double(w), std::vector<double>(12, 0.0), std::vector<double>(12, 0.0)};
  AdamRef rb{to_double(b), std::vector<double>(3, 0.0), std::vector<double>(3, 0.0)};
  adam.step(1e-2f);
  rw.step(to_double(w.grad()), 1e-2f, 0.1f, 0.9f, 0.95f, 1e-8f, 1);
  rb.step(to_double(b.grad()), 1e-2f, 0.0, 0.9f, 0.95f, 1e-8f, 1);
  expect_close(w, rw.p, kRtol, kAtol);
  expect_close(b, rb.p, kRtol, kAtol);
  expect_close(adam.exp_avg(0), rw.m, kRtol, kAtol);
  expect_close(adam.exp_avg_sq(0), rw.v, kRtol, kAtol);
  expect_close(adam.exp_avg(1), rb.m, kRtol, kAtol);
  EXPECT_EQ(adam.steps_taken(), 1);
}

TEST(AdamW, SeveralStepsWithGradScaleAndChangingLr) {
  Tensor w = randn({5, 4}, 10).set_requires_grad(true);
  Tensor b = randn({4}, 11).set_requires_grad(true);
  optim::AdamWOptions opt;
  opt.beta1 = 0.8f;
  opt.beta2 = 0.99f;
  opt.eps = 1e-6f;
  optim::AdamW adam(optim::decay_groups({{"w", w}, {"b", b}}, 0.05f), opt);
  AdamRef rw{to_double(w), std::vector<double>(20, 0.0), std::vector<double>(20, 0.0)};
  AdamRef rb{to_double(b), std::vector<double>(4, 0.0), std::vector<double>(4, 0.0)};
  const float lrs[5] = {1e-3f, 5e-3f, 1e-2f, 7e-3f, 2e-3f};
  const float grad_scale = 0.25f;  // e.g. a clip coefficient or 1 / loss scale
  for (int t = 1; t <= 5; ++t) {
    w.set_grad(randn({5, 4}, 20 + t, 2.0f));
    b.set_grad(randn({4}, 30 + t, 2.0f));
    // The reference sees the gradient times grad_scale, rounded to fp32 as the kernel does.
    std::vector<double> gw = to_double(w.grad()), gb = to_double(b.grad());
    for (double& g : gw) g = static_cast<float>(g * grad_scale);
    for (double& g : gb) g = static_cast<float>(g * grad_scale);
    adam.step(lrs[t - 1], grad_scale);
    rw.step(gw, lrs[t - 1], 0.05f, opt.beta1, opt.beta2, opt.eps, t);
    rb.step(gb, lrs[t - 1], 0.0, opt.beta1, opt.beta2, opt.eps, t);
  }
  expect_close(w, rw.p, kRtol, kAtol);
  expect_close(b, rb.p, kRtol, kAtol);
  expect_close(adam.exp_avg_sq(0), rw.v, kRtol, kAtol);
  expect_close(adam.exp_avg(1), rb.m, kRtol, kAtol);
  EXPECT_EQ(adam.steps_taken(), 5);
}

TEST(AdamW, ZeroGradientOnlyDecays) {
  Tensor w = randn({3, 3}, 40).set_requires_grad(true);
  const std::vector<double> before = to_double(w);
  optim::AdamW adam(optim::decay_groups({{"w", w}}, 0.5f), {});
  w.set_grad(Tensor::zeros({3, 3}));
  adam.step(0.1f);
  const float decay = 1.0f - 0.1f * 0.5f;
  std::vector<double> expect;
  for (double v : before) expect.push_back(static_cast<float>(v) * decay);
  expect_close(w, expect, 0, 0);
}

TEST(AdamW, ParametersWithoutGradientAreUntouched) {
  Tensor w = randn({2, 2}, 50).set_requires_grad(true);
  Tensor frozen = randn({2, 2}, 51).set_requires_grad(true);
  optim::AdamW adam(optim::decay_groups({{"w", w}, {"frozen", frozen}}, 0.1f), {});
  const std::vector<double> before = to_double(frozen);
  w.set_grad(randn({2, 2}, 52));
  adam.step(1e-2f);
  expect_close(frozen, before, 0, 0);  // not even weight decay
  for (double v : to_double(adam.exp_avg(1))) EXPECT_EQ(v, 0.0);
}

// PyTorch SGD: d = g + wd p; buf = d on the first step, then momentum buf + d; p -= lr buf.
TEST(Sgd, MomentumMatchesFloat64Reference) {
  Tensor w = randn({3, 4}, 60).set_requires_grad(true);
  Tensor b = randn({4}, 61).set_requires_grad(true);
  optim::Sgd sgd(optim::decay_groups({{"w", w}, {"b", b}}, 0.01f), 0.9f);
  std::vector<double> pw = to_double(w), pb = to_double(b), bw(12), bb(4);
  const float grad_scale = 0.5f;
  for (int t = 1; t <= 4; ++t) {
    w.set_grad(randn({3, 4}, 70 + t));
    b.set_grad(randn({4}, 80 + t));
    const std::vector<double> gw = to_double(w.grad()), gb = to_double(b.grad());
    sgd.step(0.1f, grad_scale);
    auto update = [&](std::vector<double>& p, std::vector<double>& buf,
                      const std::vector<double>& g, double wd) {
      for (size_t i = 0; i < p.size(); ++i) {
        const double d = g[i] * grad_scale + wd * p[i];
        buf[i] = t == 1 ? d : 0.9f * buf[i] + d;
        p[i] -= 0.1f * buf[i];
      }
    };
    update(pw, bw, gw, 0.01f);
    update(pb, bb, gb, 0.0);
  }
  expect_close(w, pw, kRtol, 1e-7);
  expect_close(b, pb, kRtol, 1e-7);
}

TEST(Sgd, PlainWithoutMomentum) {
  Tensor w = Tensor::from_vector(std::vector<float>{1.0f, -2.0f}, {2}).set_requires_grad(true);
  optim::Sgd sgd({{"w", w, 0.0f}}, 0.0f);
  w.set_grad(Tensor::from_vector(std::vector<float>{0.5f, 0.25f}, {2}));
  sgd.step(0.5f);
  sgd.step(0.5f);
  expect_close(w, {0.5, -2.25}, 0, 0);
}

TEST(Optimizer, DecayGroupsSkipVectors) {
  nn::GptConfig c;
  c.vocab_size = 10;
  c.padded_vocab_multiple = 1;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_embd = 4;
  c.block_size = 4;
  nn::Gpt model(c);
  const std::vector<optim::ParamEntry> groups = optim::decay_groups(model.named_parameters(), 0.1f);
  ASSERT_EQ(groups.size(), model.named_parameters().size());
  for (const auto& e : groups) {
    const bool matrix = e.param.dim() >= 2;
    EXPECT_EQ(e.weight_decay, matrix ? 0.1f : 0.0f) << e.name;
    // In GPT the decayed ones are exactly the weight matrices and embeddings.
    const bool vector_name = e.name.ends_with(".bias") || e.name.find("ln") != std::string::npos;
    EXPECT_EQ(matrix, !vector_name) << e.name;
  }
}

TEST(Optimizer, ZeroGradAndFactory) {
  Tensor w = randn({2, 3}, 90).set_requires_grad(true);
  Tensor g = randn({2, 3}, 91);
  w.set_grad(g);
  auto opt = optim::make_optimizer("sgd", {{"w", w, 0.0f}}, {}, 0.9f);
  opt->zero_grad();
  EXPECT_TRUE(w.grad().same(g));  // zeroed in place, buffer kept
  for (double v : to_double(g)) EXPECT_EQ(v, 0.0);
  EXPECT_NE(dynamic_cast<optim::AdamW*>(optim::make_optimizer("adamw", {}, {}, 0).get()), nullptr);
  EXPECT_ERROR_CONTAINS(optim::make_optimizer("lamb", {}, {}, 0), "unknown optimizer 'lamb'");
  Tensor strided = randn({3, 2}, 92).transpose(0, 1);
  EXPECT_ERROR_CONTAINS(optim::AdamW({{"s", strided, 0.0f}}, {}), "'s' must be dense f32");
}

}  // namespace
}  // namespace braid::testing
