// The Trainer's one step path: a strategy registered from outside (a StrategyWrapper that
// counts) receives every step, validation batch and sample, and a wrapper that overrides
// nothing else trains bitwise like the strategy it wraps.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/parallel/strategy_wrapper.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

struct Calls {
  int steps = 0, eval_batches = 0, samples = 0;
};
Calls calls;

class Counting final : public parallel::StrategyWrapper {
 public:
  using StrategyWrapper::StrategyWrapper;
  parallel::StepLoss forward_backward(const nn::Gpt& model,
                                      const parallel::StepBatches& batches) override {
    ++calls.steps;
    return StrategyWrapper::forward_backward(model, batches);
  }
  double eval_loss(const nn::Gpt& model, const data::Batch& batch) override {
    ++calls.eval_batches;
    return StrategyWrapper::eval_loss(model, batch);
  }
  std::vector<int32_t> generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                const nn::SampleOptions& options) override {
    ++calls.samples;
    return StrategyWrapper::generate(model, std::move(prompt), options);
  }
};

class StrategySeamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static bool registered = false;
    if (!registered)
      parallel::register_strategy("counting", [](const parallel::StrategyOptions& o) {
        return std::make_unique<Counting>(parallel::make_strategy("none", o));
      });
    registered = true;
  }
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_seam_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::create_directories(dir_);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 5 % 11)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
    data::write_token_shard(dir_ / "val_000.bin", std::span<const int32_t>(tokens));
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig config(const std::string& strategy) const {
    return parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{0}/train_*.bin" val_pattern: "{0}/val_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 }}
training {{ steps: 3 batch_size: 2 grad_accum_steps: 2 seq_len: 16 val_every: 0 val_steps: 3 seed: 3 }}
sample {{ tokens: 5 temperature: 0.8 top_k: 4 }}
parallel {{ strategy: "{1}" }}
)",
                                    dir_.string(), strategy),
                        "seam");
  }

  fs::path dir_;
};

TEST_F(StrategySeamTest, TheTrainerStepsEvaluatesAndSamplesThroughTheStrategy) {
  Trainer plain(config("none"));
  calls = {};
  Trainer counted(config("counting"));
  EXPECT_EQ(counted.strategy().name(), "none");  // the wrapper names what it wraps
  for (int step = 0; step < 3; ++step) {
    const StepMetrics a = plain.train_step();
    const StepMetrics b = counted.train_step();
    EXPECT_EQ(b.loss, a.loss) << "step " << step;
    EXPECT_EQ(b.grad_norm, a.grad_norm) << "step " << step;
  }
  EXPECT_EQ(counted.evaluate(), plain.evaluate());
  EXPECT_EQ(counted.sample("ab"), plain.sample("ab"));
  EXPECT_EQ(calls.steps, 3);
  EXPECT_EQ(calls.eval_batches, 3);
  EXPECT_EQ(calls.samples, 1);
  const nn::NamedTensors want = plain.model().named_parameters();
  const nn::NamedTensors got = counted.model().named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << want[i].first;
}

}  // namespace
}  // namespace braid::train
