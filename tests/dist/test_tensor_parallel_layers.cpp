// Tensor-parallel layers against their unsharded twins fed the same input: outputs and input,
// weight and bias gradients within fp32 round-off (1e-5 of their scale), with sequence
// parallelism off and on, tp = the world size (1 to 4 ranks). The twin is the same class
// built without a TensorParallel, initialised from the same (seed, name, global index).
#include <functional>

#include "braid/autograd/grad_mode.h"
#include "braid/nn/gpt.h"
#include "braid/nn/init.h"
#include "braid/ops.h"
#include "braid/parallel/tensor_parallel.h"
#include "dist_test.h"
#include "support/test_util.h"

namespace braid::dist::testing {
namespace {

using braid::testing::randn;
using braid::testing::random_ids;
using nn::ShardSpec;

// fp32 results of the same math in a different summation order: 1e-5 of the tensor's scale.
void expect_equal_up_to_rounding(const Tensor& actual, const Tensor& expected,
                                 const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<float> a = actual.to_vector(), e = expected.to_vector();
  double scale = 0, worst = 0;
  size_t at = 0;
  for (float v : e) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < e.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - e[i]);
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, 1e-5 * std::max(scale, 1e-6))
      << what << ": worst element " << at << " is " << a[at] << " vs " << e[at];
}

// Same (seed, name, global index) values in the twin and in every shard.
void init_like_twin(nn::Module& module, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  const auto shards = module.shard_specs();
  for (auto& [name, p] : module.named_parameters()) {
    Tensor t = p.detach();
    nn::init::normal_(t, seed, name, 0.3f, shards.at(name));
  }
}

// Every parameter gradient of `shard` equals its slice of the twin's.
void expect_gradients_match(const nn::Module& shard, const nn::Module& twin,
                            const std::string& what) {
  const auto twin_params = twin.state_dict();
  const auto specs = shard.shard_specs();
  for (const auto& [name, p] : shard.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << what << ": no gradient for " << name;
    expect_equal_up_to_rounding(p.grad(), specs.at(name).slice(twin_params.at(name).grad()),
                                what + " grad " + name);
  }
}

// A leaf holding `values`.
Tensor leaf(const Tensor& values) {
  Tensor t = values.clone();
  t.set_requires_grad(true);
  return t;
}

class TensorParallelLayers : public DistTest {
 protected:
  nn::TensorParallelPtr tp(bool sequence_parallel) const {
    return std::make_shared<parallel::TensorParallelGroup>(world_ptr(), sequence_parallel);
  }
  // This rank's piece of dim `dim` of `t`.
  Tensor piece(const Tensor& t, int dim) const {
    return ShardSpec::split(t.shape(), dim, size(), rank()).slice(t);
  }

  // Runs the twin on `x` and the shard on `x_local` (the input as this rank sees it); the
  // loss weights the outputs with fixed random values (the shard's own slice of them, cut by
  // `out_slice`), so every output element carries a different gradient. Compares outputs,
  // input gradients (cut by `in_slice`) and parameter gradients.
  void compare(const nn::Module& shard, const nn::Module& twin,
               const std::function<Tensor(const Tensor&)>& run_shard,
               const std::function<Tensor(const Tensor&)>& run_twin, const Tensor& x,
               const std::function<Tensor(const Tensor&)>& in_slice,
               const std::function<Tensor(const Tensor&)>& out_slice, const std::string& what) {
    const bool differentiable_input = x.dtype() == DType::f32;
    Tensor x_twin = differentiable_input ? leaf(x) : x;
    Tensor x_shard = differentiable_input ? leaf(in_slice(x)) : in_slice(x);
    const Tensor y_twin = run_twin(x_twin);
    const Tensor y = run_shard(x_shard);
    const Tensor weights = randn(y_twin.shape(), 99);
    expect_equal_up_to_rounding(y, out_slice(y_twin), what + " output");
    sum(mul(y_twin, weights)).backward();
    sum(mul(y, out_slice(weights))).backward();
    if (differentiable_input)
      expect_equal_up_to_rounding(x_shard.grad(), in_slice(x_twin.grad()), what + " input grad");
    expect_gradients_match(shard, twin, what);
  }
};

const auto kWhole = [](const Tensor& t) { return t; };

TEST_F(TensorParallelLayers, ColumnParallelLinearMatchesLinear) {
  const int64_t b = 2, t = 12, in = 12;
  for (bool sp : {false, true}) {
    for (int64_t groups : {1, 3}) {
      // Each group's rows split over 1 to 4 ranks.
      const int64_t out = groups * 12;
      nn::ColumnParallelLinear twin(in, out, nullptr, true, groups);
      nn::ColumnParallelLinear shard(in, out, tp(sp), true, groups);
      init_like_twin(twin, 5);
      init_like_twin(shard, 5);
      const int64_t features = twin.weight.size(0);
      auto out_slice = [&](const Tensor& y) {
        return ShardSpec::split_groups(y.shape(), 2, static_cast<int>(groups), size(), rank())
            .slice(y);
      };
      auto in_slice = [&](const Tensor& x) { return sp ? piece(x, 1) : x; };
      compare(
          shard, twin, [&](const Tensor& x) { return shard.forward(x); },
          [&](const Tensor& x) { return twin.forward(x); }, randn({b, t, in}, 1), in_slice,
          out_slice,
          fmt::format("column-parallel {} features in {} groups, sp={}", features, groups, sp));
    }
  }
}

TEST_F(TensorParallelLayers, RowParallelLinearMatchesLinear) {
  const int64_t b = 2, t = 12, in = 24, out = 12;
  for (bool sp : {false, true}) {
    nn::RowParallelLinear twin(in, out, nullptr), shard(in, out, tp(sp));
    init_like_twin(twin, 6);
    init_like_twin(shard, 6);
    compare(
        shard, twin, [&](const Tensor& x) { return shard.forward(x); },
        [&](const Tensor& x) { return twin.forward(x); }, randn({b, t, in}, 2),
        [&](const Tensor& x) { return piece(x, 2); },
        [&](const Tensor& y) { return sp ? piece(y, 1) : y; },
        fmt::format("row-parallel, sp={}", sp));
  }
}

// The optional ends: a column-parallel layer that gathers its output and a row-parallel
// layer that takes the whole input, chained as an MLP whose ends see whole tensors.
TEST_F(TensorParallelLayers, GatheredOutputAndWholeInputMatchLinear) {
  const int64_t b = 2, t = 12, width = 12;
  for (bool sp : {false, true}) {
    nn::ColumnParallelLinear twin_in(width, 2 * width, nullptr);
    nn::ColumnParallelLinear shard_in(width, 2 * width, tp(sp), true, 1, /*gather_output=*/true);
    nn::RowParallelLinear twin_out(2 * width, width, nullptr);
    nn::RowParallelLinear shard_out(2 * width, width, tp(sp), true, /*input_is_parallel=*/false);
    for (nn::Module* m : std::initializer_list<nn::Module*>{&twin_in, &shard_in})
      init_like_twin(*m, 21);
    for (nn::Module* m : std::initializer_list<nn::Module*>{&twin_out, &shard_out})
      init_like_twin(*m, 22);
    auto seq = [&](const Tensor& x) { return sp ? piece(x, 1) : x; };
    // Gathered column output then a whole-input row layer: the middle is whole on every rank.
    compare(
        shard_in, twin_in, [&](const Tensor& x) { return gelu(shard_in.forward(x)); },
        [&](const Tensor& x) { return gelu(twin_in.forward(x)); }, randn({b, t, width}, 23), seq,
        [&](const Tensor& y) { return y; }, fmt::format("gathered column output, sp={}", sp));
    compare(
        shard_out, twin_out, [&](const Tensor& x) { return shard_out.forward(x); },
        [&](const Tensor& x) { return twin_out.forward(x); }, randn({b, t, 2 * width}, 24),
        [&](const Tensor& x) { return x; }, seq, fmt::format("whole-input row layer, sp={}", sp));
  }
  EXPECT_ERROR_CONTAINS(nn::ColumnParallelLinear(width, 3 * width, tp(false), true, 3, true),
                        "cannot gather its output");
}

TEST_F(TensorParallelLayers, VocabParallelEmbeddingMatchesEmbedding) {
  const int64_t vocab = 48, dim = 12;
  for (bool sp : {false, true}) {
    nn::VocabParallelEmbedding twin(vocab, dim, nullptr), shard(vocab, dim, tp(sp));
    init_like_twin(twin, 7);
    init_like_twin(shard, 7);
    compare(
        shard, twin, [&](const Tensor& ids) { return shard.forward(ids); },
        [&](const Tensor& ids) { return twin.forward(ids); }, random_ids({2, 12}, vocab, 3), kWhole,
        [&](const Tensor& y) { return sp ? piece(y, 1) : y; },
        fmt::format("vocab-parallel embedding, sp={}", sp));
  }
}

// Attention with heads split (fused qkv by heads), the column -> row MLP and, under sequence
// parallelism, the LayerNorms on a piece of the sequence with their gradients summed.
TEST_F(TensorParallelLayers, TransformerBlockMatchesTheSingleProcessBlock) {
  const int64_t width = 24, heads = 12;
  for (bool sp : {false, true}) {
    nn::Block twin(width, heads, nullptr), shard(width, heads, tp(sp));
    init_like_twin(twin, 8);
    init_like_twin(shard, 8);
    auto seq = [&](const Tensor& x) { return sp ? piece(x, 1) : x; };
    compare(
        shard, twin, [&](const Tensor& x) { return shard.forward(x); },
        [&](const Tensor& x) { return twin.forward(x); }, randn({2, 12, width}, 4), seq, seq,
        fmt::format("block with {} of {} heads per rank, sp={}", heads / size(), heads, sp));
  }
}

// Plain cross-entropy over the whole logits vs the vocabulary-parallel one over this rank's
// columns: vocabularies that fill the padded width, leave padding in the last piece, and
// leave whole pieces of padding (48 columns, 30 classes, 4 ranks: the last piece is all
// padding). Padding columns hold large values to prove they take no part; two rows are ignored.
TEST_F(TensorParallelLayers, VocabParallelCrossEntropyMatchesCrossEntropy) {
  const int64_t rows = 10, padded = 48;
  for (int64_t classes : {48, 45, 30}) {
    Tensor logits = randn({rows, padded}, 10, 2.0f);
    if (classes < padded) logits.narrow(1, classes, padded - classes).fill_(50.0f);
    Tensor targets = random_ids({rows}, classes, 11);
    targets.data<int32_t>()[3] = -1;
    targets.data<int32_t>()[7] = -1;
    Tensor full = leaf(logits);
    const Tensor expected = cross_entropy(full, targets, classes);
    expected.backward();
    const int64_t width = padded / size();
    Tensor mine = leaf(piece(logits, 1));
    const Tensor loss = parallel::vocab_parallel_cross_entropy(mine, targets, width * rank(),
                                                               classes, -1, world_ptr());
    const std::string what = fmt::format("{} classes in {} padded columns", classes, padded);
    EXPECT_NEAR(loss.item(), expected.item(), 1e-5 * std::fabs(expected.item())) << what;
    loss.backward();
    expect_equal_up_to_rounding(mine.grad(), piece(full.grad(), 1), what + " gradient");
  }
}

// The whole GPT: logits (this rank's vocabulary columns), loss, every parameter gradient and a
// greedy sample equal the single-process model's; vocabulary 50 is padded for every tp.
TEST_F(TensorParallelLayers, GptMatchesTheSingleProcessModel) {
  nn::GptConfig config;
  config.vocab_size = 50;
  config.padded_vocab_multiple = 8;
  config.n_layer = 2;
  config.n_head = 12;
  config.n_embd = 24;
  config.block_size = 12;
  for (bool sp : {false, true}) {
    const std::string what = fmt::format("GPT sp={}", sp);
    nn::Gpt twin(config, nullptr), shard(config, tp(sp));
    twin.init_weights(3);
    shard.init_weights(3);
    const Tensor ids = random_ids({2, 12}, config.vocab_size, 12);
    const Tensor targets = random_ids({2, 12}, config.vocab_size, 13);
    {
      autograd::NoGradGuard no_grad;
      // The twin's columns beyond its own padding are the extra padding of the tp layout.
      const Tensor full = twin.forward(ids);
      const int64_t width = shard.padded_vocab() / size();
      const int64_t begin = shard.vocab_begin();
      const int64_t real = std::clamp<int64_t>(config.vocab_size - begin, 0, width);
      expect_equal_up_to_rounding(shard.forward(ids).narrow(2, 0, real).contiguous(),
                                  full.narrow(2, begin, real).contiguous(), what + " logits");
    }
    const Tensor expected = twin.loss(ids, targets);
    const Tensor loss = shard.loss(ids, targets);
    EXPECT_NEAR(loss.item(), expected.item(), 1e-5 * expected.item()) << what;
    expected.backward();
    loss.backward();
    const auto twin_params = twin.state_dict();
    const auto specs = shard.shard_specs();
    for (const auto& [name, p] : shard.named_parameters()) {
      Tensor reference = twin_params.at(name).grad();
      // The embedding gradient's extra padding rows (tp layout only) are zero.
      if (reference.size(0) != specs.at(name).global_shape[0]) {
        Tensor padded_grad = Tensor::zeros(specs.at(name).global_shape);
        padded_grad.narrow(0, 0, reference.size(0)).copy_(reference);
        reference = padded_grad;
      }
      expect_equal_up_to_rounding(p.grad(), specs.at(name).slice(reference), what + " " + name);
    }
    nn::SampleOptions greedy;
    greedy.max_new_tokens = 6;
    greedy.top_k = 1;
    EXPECT_EQ(shard.generate({1, 2, 3}, greedy), twin.generate({1, 2, 3}, greedy)) << what;
  }
}

TEST_F(TensorParallelLayers, UnevenSplitsAreClearErrors) {
  if (size() == 1) GTEST_SKIP() << "every size splits over one rank";
  nn::GptConfig config;
  config.vocab_size = 50;
  config.n_layer = 1;
  config.n_head = 2 * size() + 1;
  config.n_embd = config.n_head * 4;
  EXPECT_ERROR_CONTAINS(
      nn::Gpt(config, tp(false)),
      fmt::format("tp={} does not divide model.n_head = {}", size(), config.n_head));
  config.n_head = size();
  config.n_embd = size() * 3;
  nn::Gpt model(config, tp(true));
  model.init_weights(1);
  EXPECT_ERROR_CONTAINS(model.forward(random_ids({1, size() + 1}, 50, 1)),
                        "does not split over tp=");
}

}  // namespace
}  // namespace braid::dist::testing
