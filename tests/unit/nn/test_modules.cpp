// nn modules: GPT parameter names, state_dict round trips and errors, initialisation, vocabulary
// padding (zero rows, no effect on loss or real-row gradients), layers and sampling.
#include <cmath>

#include "braid/autograd/grad_mode.h"
#include "braid/core/generator.h"
#include "braid/nn/gpt.h"
#include "braid/ops.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

nn::GptConfig tiny(int64_t padded_multiple = 16, int64_t layers = 1) {
  nn::GptConfig c;
  c.vocab_size = 50;
  c.padded_vocab_multiple = padded_multiple;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 12;
  return c;
}

TEST(Gpt, ParameterNamesAndShapesForOneLayer) {
  nn::Gpt model(tiny());
  const std::vector<std::pair<std::string, Shape>> expect{
      {"wte.weight", {64, 8}},
      {"wpe.weight", {12, 8}},
      {"blocks.0.ln1.weight", {8}},
      {"blocks.0.ln1.bias", {8}},
      {"blocks.0.attn.qkv.weight", {24, 8}},
      {"blocks.0.attn.qkv.bias", {24}},
      {"blocks.0.attn.proj.weight", {8, 8}},
      {"blocks.0.attn.proj.bias", {8}},
      {"blocks.0.ln2.weight", {8}},
      {"blocks.0.ln2.bias", {8}},
      {"blocks.0.mlp.fc.weight", {32, 8}},
      {"blocks.0.mlp.fc.bias", {32}},
      {"blocks.0.mlp.proj.weight", {8, 32}},
      {"blocks.0.mlp.proj.bias", {8}},
      {"ln_f.weight", {8}},
      {"ln_f.bias", {8}},
  };
  const nn::NamedTensors params = model.named_parameters();
  ASSERT_EQ(params.size(), expect.size());
  int64_t total = 0;
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(params[i].first, expect[i].first);
    EXPECT_EQ(params[i].second.shape(), expect[i].second) << expect[i].first;
    EXPECT_TRUE(params[i].second.requires_grad()) << expect[i].first;
    EXPECT_TRUE(params[i].second.is_leaf()) << expect[i].first;
    total += shape_numel(expect[i].second);
  }
  EXPECT_EQ(model.num_parameters(), total);
  const std::vector<Tensor> flat = model.parameters();
  ASSERT_EQ(flat.size(), params.size());
  for (size_t i = 0; i < flat.size(); ++i) EXPECT_TRUE(flat[i].same(params[i].second));
  // Two layers add blocks.1.* in between, in registration order.
  nn::Gpt two(tiny(16, 2));
  EXPECT_EQ(two.named_parameters()[14].first, "blocks.1.ln1.weight");
  EXPECT_EQ(two.named_parameters().back().first, "ln_f.bias");
}

TEST(Gpt, ConfigValidation) {
  EXPECT_EQ(tiny(64).padded_vocab(), 64);
  EXPECT_EQ(tiny(1).padded_vocab(), 50);
  EXPECT_EQ(tiny(16).padded_vocab(), 64);
  nn::GptConfig c = tiny();
  c.n_embd = 10;
  c.n_head = 3;
  EXPECT_ERROR_CONTAINS(nn::Gpt{c}, "model.n_embd 10 is not divisible by model.n_head 3");
  c = tiny();
  c.vocab_size = 0;
  EXPECT_ERROR_CONTAINS(c.validate(), "vocab_size must be > 0, got 0");
  EXPECT_ERROR_CONTAINS(nn::CausalSelfAttention(10, 4), "width 10 is not divisible by 4 heads");
}

// Tensor parallelism pads the vocabulary to a multiple of tp as well, and names the sizes that
// do not split with the nearest tp values that would.
TEST(Gpt, TensorParallelLayoutChecks) {
  nn::GptConfig c = tiny(64);
  c.vocab_size = 50;
  EXPECT_EQ(c.padded_vocab(1), 64);
  EXPECT_EQ(c.padded_vocab(4), 64);
  EXPECT_EQ(c.padded_vocab(3), 192);
  c.padded_vocab_multiple = 1;
  EXPECT_EQ(c.padded_vocab(4), 52);
  c.n_head = 12;
  c.n_embd = 48;
  EXPECT_EQ(c.tensor_parallel_problem(4), "");
  EXPECT_EQ(c.tensor_parallel_problem(12), "");
  EXPECT_EQ(c.tensor_parallel_problem(5),
            "tensor parallelism tp=5 does not divide model.n_head = 12; nearest valid tp: 4 or 6");
  EXPECT_EQ(c.tensor_parallel_problem(16),
            "tensor parallelism tp=16 does not divide model.n_head = 12; nearest valid tp: 12");
  c.n_head = 8;
  c.n_embd = 24;  // 8 heads of width 3 split over 8 ranks
  EXPECT_EQ(c.tensor_parallel_problem(8), "");
  EXPECT_NE(c.tensor_parallel_problem(0).find("must be >= 1"), std::string::npos);
}

// Parameters record which slice of the single-process tensor they hold; unsharded ones hold
// all of it.
TEST(Gpt, ShardSpecsOfTheSingleProcessModelAreWhole) {
  nn::Gpt model(tiny());
  const auto specs = model.shard_specs();
  ASSERT_EQ(specs.size(), model.named_parameters().size());
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_TRUE(specs.at(name).is_whole()) << name;
    EXPECT_EQ(specs.at(name).global_shape, p.shape()) << name;
  }
}

TEST(Gpt, ForwardInputErrors) {
  nn::Gpt model(tiny());
  model.init_weights(1);
  EXPECT_ERROR_CONTAINS(model.forward(random_ids({1, 13}, 50, 1)), "sequence of 13 tokens");
  EXPECT_ERROR_CONTAINS(model.forward(random_ids({6}, 50, 1)), "i32[6]");
  EXPECT_ERROR_CONTAINS(model.forward(Tensor::from_vector(std::vector<int32_t>{1, 64}, {1, 2})),
                        "token id 64");
}

TEST(Gpt, InitialisationByName) {
  nn::Gpt model(tiny(16, 2));
  model.init_weights(5);
  const int64_t v = 50, vp = 64, c = 8;
  for (auto& [name, p] : model.named_parameters()) {
    const std::vector<double> x = to_double(p);
    const bool is_bias = name.ends_with(".bias");
    const bool is_ln_weight =
        name.ends_with("ln1.weight") || name.ends_with("ln2.weight") || name == "ln_f.weight";
    if (is_bias || is_ln_weight) {
      for (double e : x) EXPECT_EQ(e, is_bias ? 0.0 : 1.0) << name;
      continue;
    }
    // Matrices: std * normal_at(seed, hash(name), index), residual projections scaled down.
    const bool residual = name.ends_with("attn.proj.weight") || name.ends_with("mlp.proj.weight");
    const float std = residual ? 0.02f / std::sqrt(4.0f) : 0.02f;
    const int64_t real = name == "wte.weight" ? v * c : static_cast<int64_t>(x.size());
    for (int64_t i = 0; i < real; ++i)
      ASSERT_EQ(x[i], std * normal_at(5, stable_hash(name), static_cast<uint64_t>(i)))
          << name << " " << i;
  }
  // The padding rows of the tied embedding are zero: no token selects them, no logit uses them.
  const std::vector<double> wte = to_double(model.wte->weight);
  for (int64_t i = v * c; i < vp * c; ++i) ASSERT_EQ(wte[i], 0.0) << i;
}

TEST(StateDict, RoundTripSharesStorage) {
  nn::Gpt a(tiny()), b(tiny());
  a.init_weights(1);
  b.init_weights(2);
  const std::map<std::string, Tensor> state = a.state_dict();
  EXPECT_EQ(state.size(), a.named_parameters().size());
  EXPECT_EQ(state.at("wte.weight").storage(), a.wte->weight.storage());
  b.load_state_dict(state);
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(pa[i].second, pb[i].second)) << pa[i].first;
    EXPECT_NE(pa[i].second.storage(), pb[i].second.storage()) << "load copies values in";
    EXPECT_TRUE(pb[i].second.is_leaf());
    EXPECT_TRUE(pb[i].second.requires_grad());
  }
  // Loading is a copy: the source may change afterwards without touching the model.
  Tensor src = state.at("ln_f.bias");
  src.detach().fill_(9.0f);
  EXPECT_EQ(b.ln_f->bias.to_vector()[0], 0.0f);
  // Values of another dtype are converted on load.
  std::map<std::string, Tensor> half = b.state_dict();
  for (auto& [name, t] : half) t = t.to(DType::bf16);
  a.load_state_dict(half);
  const std::vector<float> w = a.wpe->weight.to_vector(), wb = b.wpe->weight.to_vector();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], bf16_to_f32(f32_to_bf16(wb[i])));
}

TEST(StateDict, ErrorsNameTheTensor) {
  nn::Gpt model(tiny());
  std::map<std::string, Tensor> state = model.state_dict();
  std::map<std::string, Tensor> missing = state;
  missing.erase("blocks.0.mlp.fc.bias");
  EXPECT_ERROR_CONTAINS(model.load_state_dict(missing), "no tensor 'blocks.0.mlp.fc.bias'");
  std::map<std::string, Tensor> unexpected = state;
  unexpected["blocks.1.ln1.weight"] = Tensor::zeros({8});
  EXPECT_ERROR_CONTAINS(model.load_state_dict(unexpected),
                        "'blocks.1.ln1.weight' matches no model parameter");
  std::map<std::string, Tensor> wrong = state;
  wrong["wpe.weight"] = Tensor::zeros({13, 8});
  EXPECT_ERROR_CONTAINS(
      model.load_state_dict(wrong),
      "tensor 'wpe.weight' has shape [13, 8] in the state dict but [12, 8] in the model");
  // Non-strict loading skips missing and unexpected names but never a wrong shape.
  EXPECT_NO_THROW(model.load_state_dict(missing, false));
  EXPECT_NO_THROW(model.load_state_dict(unexpected, false));
  EXPECT_ERROR_CONTAINS(model.load_state_dict(wrong, false), "wpe.weight");
}

// The same model with padded_vocab_multiple 1 (50 rows) and 64 (64 rows): init draws by global
// index, so the real rows agree, and the padding must change neither the loss nor the real
// gradients. Only GEMM's blocking over 50 vs 64 output columns can differ, which may reorder
// its length-C sums: a few 2^-24 relative, hence 1e-6 on the loss and 1e-5 on gradients.
TEST(Gpt, VocabPaddingDoesNotChangeLossOrGradients) {
  nn::Gpt plain(tiny(1, 2)), padded(tiny(64, 2));
  plain.init_weights(3);
  padded.init_weights(3);
  ASSERT_EQ(plain.wte->weight.size(0), 50);
  ASSERT_EQ(padded.wte->weight.size(0), 64);
  EXPECT_TRUE(bitwise_equal(plain.wte->weight, padded.wte->weight.narrow(0, 0, 50)));
  Tensor ids = random_ids({2, 12}, 50, 30), targets = random_ids({2, 12}, 50, 31);
  Tensor lp = plain.loss(ids, targets), lq = padded.loss(ids, targets);
  EXPECT_NEAR(lq.item(), lp.item(), 1e-6 * std::abs(lp.item()));
  lp.backward();
  lq.backward();
  const auto a = plain.named_parameters(), b = padded.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    Tensor gb = b[i].second.grad();
    if (a[i].first == "wte.weight") {
      for (double g : to_double(gb.narrow(0, 50, 14))) ASSERT_EQ(g, 0.0) << "padding row gradient";
      gb = gb.narrow(0, 0, 50);
    }
    expect_close(gb, to_double(a[i].second.grad()), 1e-5, 1e-7);
  }
  // Padded logits are exactly zero (zero rows) and the loss only sees the real columns.
  autograd::NoGradGuard no_grad;
  Tensor logits = padded.forward(ids);
  EXPECT_EQ(logits.shape(), (Shape{2, 12, 64}));
  for (double v : to_double(logits.narrow(2, 50, 14))) ASSERT_EQ(v, 0.0);
}

TEST(Layers, ForwardsMatchOps) {
  nn::Linear lin(4, 3), nobias(4, 3, false);
  nn::Embedding emb(6, 4);
  nn::LayerNorm ln(4, 1e-3f);
  autograd::NoGradGuard no_grad;
  for (nn::Module* m : std::initializer_list<nn::Module*>{&lin, &nobias, &emb, &ln}) {
    uint64_t seed = 50;
    for (auto& [name, p] : m->named_parameters()) p.detach().copy_(randn(p.shape(), seed++));
  }
  EXPECT_EQ(nobias.named_parameters().size(), 1u);
  EXPECT_FALSE(nobias.bias.defined());
  Tensor x = randn({2, 3, 4}, 60);
  EXPECT_TRUE(bitwise_equal(lin.forward(x), linear(x, lin.weight, lin.bias)));
  EXPECT_TRUE(bitwise_equal(nobias.forward(x), linear(x, nobias.weight)));
  EXPECT_TRUE(bitwise_equal(ln.forward(x), layer_norm(x, ln.weight, ln.bias, 1e-3f)));
  Tensor ids = random_ids({2, 5}, 6, 61);
  EXPECT_TRUE(bitwise_equal(emb.forward(ids), embedding(emb.weight, ids)));
  EXPECT_EQ(ln.eps, 1e-3f);
}

TEST(Module, ZeroGradKeepsBuffers) {
  nn::Gpt model(tiny());
  model.init_weights(4);
  model.loss(random_ids({1, 6}, 50, 70), random_ids({1, 6}, 50, 71)).backward();
  std::vector<Tensor> grads;
  for (auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    grads.push_back(p.grad());
  }
  model.zero_grad();
  const auto params = model.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].second.grad().same(grads[i])) << params[i].first;
    for (double g : to_double(grads[i])) ASSERT_EQ(g, 0.0) << params[i].first;
  }
}

TEST(Gpt, GenerateIsDeterministicAndGreedyIsArgmax) {
  nn::Gpt model(tiny(64, 2));
  model.init_weights(8);
  nn::SampleOptions opts;
  opts.max_new_tokens = 15;  // runs past block_size (12): the context window slides
  opts.seed = 3;
  const std::vector<int32_t> prompt{1, 2, 3};
  const std::vector<int32_t> a = model.generate(prompt, opts), b = model.generate(prompt, opts);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), prompt.size() + 15);
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), a.begin()));
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < 50) << t;  // never a padding id
  opts.top_k = 1;
  opts.max_new_tokens = 1;
  const std::vector<int32_t> greedy = model.generate(prompt, opts);
  autograd::NoGradGuard no_grad;
  const std::vector<double> logits = to_double(model.forward(Tensor::from_vector(prompt, {1, 3})));
  int32_t best = 0;
  for (int32_t i = 1; i < 50; ++i)
    if (logits[2 * 64 + i] > logits[2 * 64 + best]) best = i;
  EXPECT_EQ(greedy.back(), best);
  EXPECT_ERROR_CONTAINS(model.generate({}, opts), "non-empty prompt");
  opts.temperature = 0;
  EXPECT_ERROR_CONTAINS(model.generate(prompt, opts), "temperature must be > 0");
}

TEST(Gpt, TrainingFlopsConvention) {
  const nn::GptConfig c = tiny(64, 2);
  // 6N + 6 L T C with N = 1000, L = 2, T = 12, C = 8.
  EXPECT_EQ(nn::training_flops_per_token(c, 1000, 12), 6.0 * 1000 + 6.0 * 2 * 12 * 8);
}

}  // namespace
}  // namespace braid::testing
