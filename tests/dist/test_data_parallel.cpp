// Data parallelism against single-process training: DDP and ZeRO-1 on every world size give
// the same per-step losses (rel. diff <= 1e-5 over 20 fp32 steps) and parameters (1e-5), also
// with gradient accumulation; buckets are reduced from the backward's hooks.
#include <filesystem>
#include <vector>

#include "braid/parallel/data_parallel.h"
#include "braid/train/trainer.h"
#include "dist_test.h"
#include "training_equivalence.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

std::string config_text(const fs::path& dir, int dp, int batch, int accum,
                        const std::string& strategy, const std::string& optimizer) {
  return fmt::format(
      R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ {} warmup_steps: 2 }}
training {{ steps: 20 batch_size: {} grad_accum_steps: {} seq_len: 16 val_every: 0 seed: 11 }}
parallel {{ dp: {} strategy: "{}" {} }}
)",
      dir.string(), optimizer, batch, accum, dp, strategy,
      // Small buckets, so the model spans several and their order matters.
      strategy == "none" ? "" : R"(strategy_options { key: "bucket_mb" value: "0.02" })");
}

constexpr double kLearningRate = 1e-2;
const char* kAdamW = R"(name: "adamw" lr: 1e-2 weight_decay: 0.1 grad_clip: 1.0)";

void expect_same_training(const TrainingRun& actual, const TrainingRun& expected,
                          const std::string& what) {
  testing::expect_same_training(actual, expected, what, kLearningRate);
}

class DataParallelTest : public DistTest {
 protected:
  void SetUp() override { dir_ = write_corpus("braid_dp_", rank()); }
  void TearDown() override {
    fs::remove_all(dir_);
    DistTest::TearDown();
  }
  train::TrainConfig config(int dp, int batch, int accum, const std::string& strategy,
                            const char* optimizer = kAdamW) const {
    return train::parse_config(config_text(dir_, dp, batch, accum, strategy, optimizer), "test");
  }
  fs::path dir_;
};

// The same global batch of 12 sequences, one process vs size() ranks of 12 / size().
TEST_F(DataParallelTest, DdpAndZero1TrainLikeOneProcess) {
  if (12 % size() != 0) GTEST_SKIP() << "12 sequences do not split over " << size() << " ranks";
  const TrainingRun single = train(config(1, 12, 1, "none"), nullptr, 20);
  const TrainingRun ddp = train(config(size(), 12 / size(), 1, "ddp"), world_ptr(), 20);
  expect_same_training(ddp, single, "ddp");
  const TrainingRun zero1 = train(config(size(), 12 / size(), 1, "zero1"), world_ptr(), 20);
  expect_same_training(zero1, single, "zero1");
  expect_same_training(zero1, ddp, "zero1 vs ddp");
}

// 2 micro-batches of 12 / size() per rank equal one process with a batch of 24.
TEST_F(DataParallelTest, GradientAccumulationEqualsTheLargerBatch) {
  if (12 % size() != 0) GTEST_SKIP() << "12 sequences do not split over " << size() << " ranks";
  const TrainingRun single = train(config(1, 24, 1, "none"), nullptr, 10);
  for (const char* strategy : {"ddp", "zero1"}) {
    const TrainingRun accum = train(config(size(), 12 / size(), 2, strategy), world_ptr(), 10);
    expect_same_training(accum, single, std::string(strategy) + " with accumulation");
  }
}

// Every bucket starts reducing from a grad-ready hook while the backward still runs.
TEST_F(DataParallelTest, BucketsLaunchDuringBackward) {
  train::Trainer trainer(config(size(), 12, 1, "ddp"), world_ptr());
  trainer.train_step();
  auto& dp = dynamic_cast<parallel::DataParallel&>(trainer.strategy());
  EXPECT_GT(dp.num_buckets(), 2u) << "bucket_mb 0.02 should cut this model into several buckets";
  EXPECT_EQ(dp.buckets_launched_during_backward(), dp.num_buckets());
}

TEST_F(DataParallelTest, LayoutThatDoesNotMatchTheWorldIsAClearError) {
  try {
    train::Trainer trainer(config(size() + 1, 2, 1, "ddp"), world_ptr());
    FAIL() << "dp=" << size() + 1 << " on " << size() << " ranks must be rejected";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(fmt::format("but the job has {}", size())), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("dp={} would fit", size())), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace braid::dist::testing
