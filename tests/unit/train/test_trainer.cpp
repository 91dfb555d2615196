// Trainer tests: the loop lowers the loss, gradient accumulation equals one larger batch,
// non-finite losses stop with the step number or are skipped, bad data is reported.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "braid/core/generator.h"
#include "braid/data/token_shard.h"
#include "braid/optim/clip.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

// A temporary folder with a small train/val corpus of byte tokens following a simple pattern
// (so a tiny model can learn it).
class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_trainer_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 6000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
    data::write_token_shard(dir_ / "val_000.bin",
                            std::span<const int32_t>(tokens.data(), tokens.size() / 4));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string config_text(const std::string& extra_training = "") const {
    return fmt::format(R"(
model {{ vocab_size: 257 n_layer: 1 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" val_pattern: "{}/val_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 }}
training {{ steps: 40 seq_len: 16 val_every: 0 val_steps: 4 log_every: 100 seed: 3 {} }}
)",
                       dir_.string(), dir_.string(), extra_training);
  }

  fs::path dir_;
};

// The training loop leaves no handle on a gradient between steps, so zero_grad's fill is
// deferred for every parameter (the next backward writes over it; autograd::zero_grad).
TEST_F(TrainerTest, ZeroGradIsDeferredForEveryParameter) {
  Trainer trainer(parse_config(config_text("batch_size: 4"), "test"));
  trainer.train_step();
  trainer.optimizer().zero_grad();
  int64_t stale = 0, total = 0;
  for (const auto& [name, p] : trainer.model().named_parameters()) {
    ++total;
    stale += p.impl()->autograd != nullptr && p.impl()->autograd->grad_stale;
  }
  EXPECT_GT(total, 0);
  EXPECT_EQ(stale, total);
}

TEST_F(TrainerTest, LossFallsOnALearnablePattern) {
  Trainer trainer(parse_config(config_text("batch_size: 4"), "test"));
  const float before = trainer.evaluate();
  trainer.fit();
  const float after = trainer.evaluate();
  EXPECT_LT(after, 0.5f * before) << before << " -> " << after;
  ASSERT_EQ(trainer.history().size(), 40u);
  EXPECT_GT(trainer.history().back().tokens_per_s, 0);
  EXPECT_GT(trainer.history().back().peak_bytes, 0);
}

// The gradient of k micro-batches of B rows equals that of one batch of k * B rows (the step's
// loss is the mean over micro-batches of per-batch means, and every row has the same number
// of targets), so training is the same up to fp32 summation order.
TEST_F(TrainerTest, GradientAccumulationEqualsOneLargerBatch) {
  Trainer big(parse_config(config_text("batch_size: 8"), "big"));
  Trainer accum(parse_config(config_text("batch_size: 4 grad_accum_steps: 2"), "accum"));
  // Same rows: the accumulating trainer gets each big batch as two halves.
  std::vector<data::Batch> halves;
  big.set_batch_source([&] {
    data::Batch b;
    std::vector<int32_t> x(8 * 16), y(8 * 16);
    const uint64_t draw = halves.size();
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<int32_t>('a' + uniform_at(1, draw, i) * 13);
      y[i] = static_cast<int32_t>('a' + uniform_at(2, draw, i) * 13);
    }
    b.inputs = Tensor::from_vector(x, {8, 16});
    b.targets = Tensor::from_vector(y, {8, 16});
    halves.push_back(
        {b.inputs.narrow(0, 0, 4).contiguous(), b.targets.narrow(0, 0, 4).contiguous()});
    halves.push_back(
        {b.inputs.narrow(0, 4, 4).contiguous(), b.targets.narrow(0, 4, 4).contiguous()});
    return b;
  });
  size_t next_half = 0;
  accum.set_batch_source([&] { return halves.at(next_half++); });
  for (int step = 0; step < 5; ++step) {
    const StepMetrics a = big.train_step();
    const StepMetrics b = accum.train_step();
    EXPECT_NEAR(b.loss, a.loss, 1e-5 * std::fabs(a.loss)) << "step " << step;
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-4 * a.grad_norm) << "step " << step;
  }
}

// The single-process strategy takes each gradient's squares in its grad-ready hook; the norm
// it reports must be bitwise the one a separate pass over the final gradients computes, with
// micro-batches (only the last backward's hooks see final gradients) and with activation
// recomputation (hooks fire while blocks are re-run).
TEST_F(TrainerTest, GradNormFromReadyHooksEqualsASeparatePass) {
  for (const std::string extra : {"batch_size: 4", "batch_size: 2 grad_accum_steps: 3"})
    for (const bool recompute : {false, true}) {
      std::string config = config_text(extra);
      if (recompute)
        config.replace(config.find("block_size: 16"), 14, "block_size: 16 recompute: true");
      Trainer trainer(parse_config(config, "ready"));
      for (int step = 0; step < 3; ++step) {
        const StepMetrics m = trainer.train_step();
        const double separate = optim::clip_coefficient(trainer.model().parameters(), 1.0f).norm;
        ASSERT_GT(separate, 0.0);
        EXPECT_EQ(m.grad_norm, separate) << extra << " recompute " << recompute << " step " << step;
      }
    }
}

TEST_F(TrainerTest, NonFiniteLossStopsWithTheStepNumber) {
  Trainer trainer(parse_config(config_text("batch_size: 4"), "test"));
  trainer.train_step();
  trainer.model().wpe->weight.detach().fill_(NAN);
  try {
    trainer.train_step();
    FAIL() << "a NaN loss must stop training";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not finite at step 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("skip_nonfinite_steps"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, NonFiniteStepIsSkippedWhenConfigured) {
  Trainer trainer(parse_config(config_text("batch_size: 4 skip_nonfinite_steps: true"), "test"));
  // Poison the input embedding of one token the batches contain: the loss becomes NaN.
  Tensor wte = trainer.model().wte->weight.detach();
  wte.narrow(0, 'a', 13).fill_(INFINITY);
  const std::vector<float> before = trainer.model().ln_f->weight.to_vector();
  const StepMetrics m = trainer.train_step();
  EXPECT_TRUE(m.skipped);
  EXPECT_EQ(trainer.model().ln_f->weight.to_vector(), before) << "a skipped step must not update";
}

TEST_F(TrainerTest, TokenIdBeyondTheVocabularyIsReported) {
  std::vector<int32_t> bad(200, 'a');
  bad[137] = 300;
  data::write_token_shard(dir_ / "train_001.bin", std::span<const int32_t>(bad));
  try {
    Trainer trainer(parse_config(config_text("batch_size: 4"), "test"));
    FAIL() << "token 300 >= vocab 257 must be rejected";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("300"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train_001.bin"), std::string::npos) << msg;
  }
}

TEST_F(TrainerTest, MissingDataIsReportedWithThePattern) {
  TrainConfig config = parse_config(config_text("batch_size: 4"), "test");
  set_field(config, "data.train_pattern", (dir_ / "nothing_*.bin").string());
  try {
    Trainer trainer(std::move(config));
    FAIL() << "a pattern matching no file must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing_*.bin"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, ContextLongerThanPositionsIsRejected) {
  TrainConfig config = parse_config(config_text("batch_size: 4"), "test");
  set_field(config, "training.seq_len", "32");
  try {
    Trainer trainer(std::move(config));
    FAIL() << "seq_len 32 > block_size 16 must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seq_len"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::train
