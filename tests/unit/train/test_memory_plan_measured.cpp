// The memory plan against the host allocator's measured peak of real Trainer steps on the CPU:
// the tiny example's shape and GPT-2 124M's (batch 1 x 64 tokens), each with and without
// recompute, within 10% of the peak of a steady-state step (the second, once gradients and
// AdamW's moments exist).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/train/memory_plan.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

class MeasuredMemoryPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("braid_memory_plan_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Plans `model` trained `training`, runs two steps and compares the plan's total with the
  // second step's measured peak.
  void expect_plan_within_ten_percent(const std::string& model, const std::string& training) {
    // peak_flops given: the MFU denominator is not measured (it would cost seconds).
    const TrainConfig config = parse_config(fmt::format(R"(
model {{ {} }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-4 }}
training {{ steps: 2 log_every: 100 peak_flops: 1e12 {} }}
)",
                                                        model, dir_.string(), training),
                                            "measured");
    const MemoryPlan plan = plan_memory(config);
    ASSERT_EQ(plan.groups.size(), 1u);
    Trainer trainer(config);
    trainer.train_step();
    const StepMetrics second = trainer.train_step();
    const double measured = static_cast<double>(second.peak_bytes);
    const double planned = static_cast<double>(plan.groups[0].total);
    // The activations' share alone: the measured peak less the plan's state (parameters,
    // gradients, moments), which the step holds throughout.
    const double state = planned - static_cast<double>(plan.groups[0].activations);
    std::printf(
        "plan %.0f bytes, measured peak %.0f: %+.2f%%; activations planned %lld, "
        "measured %.0f: %+.2f%%\n",
        planned, measured, 100.0 * (planned - measured) / measured,
        static_cast<long long>(plan.groups[0].activations), measured - state,
        100.0 * (planned - measured) / (measured - state));
    EXPECT_LE(std::abs(planned - measured), 0.10 * measured)
        << "plan " << planned << " bytes, measured " << measured;
  }

  fs::path dir_;
};

constexpr const char* kTiny = "vocab_size: 50257 n_layer: 4 n_head: 4 n_embd: 256 block_size: 128";
constexpr const char* kGpt2 =
    "vocab_size: 50257 n_layer: 12 n_head: 12 n_embd: 768 block_size: 1024";

TEST_F(MeasuredMemoryPlan, TinyShape) {
  expect_plan_within_ten_percent(kTiny, "batch_size: 4 seq_len: 128");
}

TEST_F(MeasuredMemoryPlan, TinyShapeWithRecompute) {
  expect_plan_within_ten_percent(std::string(kTiny) + " recompute: true",
                                 "batch_size: 4 seq_len: 128");
}

TEST_F(MeasuredMemoryPlan, Gpt2SmallShape) {
  expect_plan_within_ten_percent(kGpt2, "batch_size: 1 seq_len: 64");
}

TEST_F(MeasuredMemoryPlan, Gpt2SmallShapeWithRecompute) {
  expect_plan_within_ten_percent(std::string(kGpt2) + " recompute: true",
                                 "batch_size: 1 seq_len: 64");
}

}  // namespace
}  // namespace braid::train
