// The Trainer with training.device cuda over 2 ranks on the emulated devices (stand-in
// transport) against single-process CPU training of the same global batch, and its clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "braid/train/trainer.h"
#include "dist/nccl_process_group.h"
#include "training_equivalence.h"
#include "two_device_test.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 5;
constexpr double kLearningRate = 1e-2;
constexpr double kGradClip = 1.0;

struct DeviceLayout {
  int tp = 1, dp = 1;
  bool sequence_parallel = false;
  std::string strategy = "auto";
  std::string device = "cpu";
  int pp = 1;
  std::string schedule = "auto";
  int virtual_stages = 1;
  std::string str() const {
    return fmt::format("{} tp={} pp={} dp={} sp={} {} {} v={}", device, tp, pp, dp,
                       sequence_parallel, strategy, schedule, virtual_stages);
  }
};

// A run as training_equivalence.h records it, plus each step's gradient norm; on the device the
// losses and norms once the device reported them, the final parameters copied to the host.
struct RecordedRun {
  TrainingRun run;
  std::vector<float> norms;
};

RecordedRun record(train::TrainConfig config, ProcessGroupPtr world, bool device) {
  train::Trainer trainer(std::move(config), std::move(world),
                         device ? train::DeviceGroupsFor(nccl_group_factory) : nullptr);
  EXPECT_EQ(trainer.device().is_cpu(), !device);
  for (int i = 0; i < kSteps; ++i) trainer.train_step();
  trainer.sync_device_metrics();
  RecordedRun out;
  for (const train::StepMetrics& m : trainer.history()) {
    out.run.losses.push_back(m.loss);
    out.norms.push_back(static_cast<float>(m.grad_norm));
  }
  for (const auto& [name, p] : trainer.model().named_parameters())
    out.run.params[name] = p.to(Device::cpu()).contiguous();
  out.run.shards = trainer.model().shard_specs();
  return out;
}

class TrainerDevice : public TwoDeviceTest {
 protected:
  void SetUp() override {
    TwoDeviceTest::SetUp();
    if (IsSkipped()) return;
    dir_ = write_corpus("braid_trainer_device_", rank());
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
    TwoDeviceTest::TearDown();
  }

  // A 4-layer tiny GPT over bytes; a global batch of 4 sequences of 16 tokens (a pipeline cuts
  // it into 2 micro-batches); clipping on.
  // The corpus doubles as the validation data; skip_nonfinite skips non-finite steps.
  train::TrainConfig config(const DeviceLayout& l, bool skip_nonfinite = false) const {
    const int global_batch = 4;
    return train::parse_config(
        fmt::format(R"(
model {{ vocab_size: 257 n_layer: 4 n_head: 4 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" val_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: {} weight_decay: 0.1 grad_clip: {} warmup_steps: 2 }}
training {{ steps: {} batch_size: {} seq_len: 16 val_every: 0 val_steps: 3 seed: 11 device: "{}"
           skip_nonfinite_steps: {} }}
parallel {{ tp: {} pp: {} dp: {} sequence_parallel: {} strategy: "{}" schedule: "{}"
           virtual_stages: {} micro_batches: {} }}
)",
                    dir_.string(), dir_.string(), kLearningRate, kGradClip, kSteps,
                    global_batch / l.dp, l.device, skip_nonfinite ? "true" : "false", l.tp, l.pp,
                    l.dp, l.sequence_parallel ? "true" : "false", l.strategy, l.schedule,
                    l.virtual_stages, l.pp > 1 ? 2 : 0),
        "test");
  }

  // Losses within 1e-5 relative and parameters within training_equivalence.h's bounds; the
  // gradient norms (the clip scale's input) within 1e-5 relative, and above grad_clip in some
  // step so that the scale matters.
  void expect_equals_cpu(const DeviceLayout& layout) {
    RecordedRun single = record(config({}), nullptr, false);
    const RecordedRun run = record(config(layout), world_ptr(), true);
    // A pipeline stage holds its blocks only (and the tied embedding on both ends): compared
    // with the same parameters of the single process.
    std::erase_if(single.run.params,
                  [&](const auto& entry) { return !run.run.params.contains(entry.first); });
    expect_same_training(run.run, single.run, layout.str(), kLearningRate);
    ASSERT_EQ(run.norms.size(), single.norms.size());
    bool clipped = false;
    for (size_t i = 0; i < run.norms.size(); ++i) {
      EXPECT_NEAR(run.norms[i], single.norms[i], 1e-5 * single.norms[i])
          << layout.str() << " gradient norm of step " << i;
      clipped |= single.norms[i] > kGradClip;
    }
    EXPECT_TRUE(clipped) << "no step clipped; the test would not see the device's scale";
  }

  fs::path dir_;
};

TEST_F(TrainerDevice, DataParallelEqualsSingleProcessCpu) {
  expect_equals_cpu({1, 2, false, "ddp", "cuda"});
}

TEST_F(TrainerDevice, ZeroOneEqualsSingleProcessCpu) {
  expect_equals_cpu({1, 2, false, "zero1", "cuda"});
}

TEST_F(TrainerDevice, TensorParallelEqualsSingleProcessCpu) {
  expect_equals_cpu({2, 1, false, "auto", "cuda"});
}

TEST_F(TrainerDevice, SequenceParallelEqualsSingleProcessCpu) {
  expect_equals_cpu({2, 1, true, "auto", "cuda"});
}

TEST_F(TrainerDevice, PipelineEqualsSingleProcessCpu) {
  DeviceLayout layout;
  layout.device = "cuda";
  layout.pp = 2;
  layout.schedule = "1f1b";
  expect_equals_cpu(layout);
}

TEST_F(TrainerDevice, InterleavedPipelineEqualsSingleProcessCpu) {
  DeviceLayout layout;
  layout.device = "cuda";
  layout.pp = 2;
  layout.schedule = "interleaved_1f1b";
  layout.virtual_stages = 2;
  expect_equals_cpu(layout);
}

// Validation on the devices: each data-parallel rank evaluates its share of the batches and
// the mean is taken over dp on the device communicator; equal to one CPU process after the same
// steps (1e-5 relative), before training and after.
TEST_F(TrainerDevice, EvaluationEqualsSingleProcessCpu) {
  for (const DeviceLayout layout :
       {DeviceLayout{1, 2, false, "ddp", "cuda"}, DeviceLayout{2, 1, true, "auto", "cuda"}}) {
    train::Trainer single(config({}), nullptr);
    train::Trainer devices(config(layout), world_ptr(), nccl_group_factory);
    for (int step = 0; step <= 2; ++step) {
      if (step > 0) {
        single.train_step();
        devices.train_step();
      }
      const float expected = single.evaluate();
      EXPECT_NEAR(devices.evaluate(), expected, 1e-5 * expected)
          << layout.str() << " after " << step << " steps";
    }
  }
}

// A NaN in one rank's copy of a parameter makes that rank's gradients, and through the
// all-reduce every rank's, non-finite: with skip_nonfinite_steps every rank skips the same steps,
// counts the same updates and leaves the other parameters as they were.
TEST_F(TrainerDevice, ANonFiniteStepOnOneRankIsSkippedByEveryRank) {
  for (const std::string strategy : {"ddp", "zero1"}) {
    const DeviceLayout layout{1, 2, false, strategy, "cuda"};
    train::Trainer t(config(layout, /*skip_nonfinite=*/true), world_ptr(), nccl_group_factory);
    t.train_step();
    t.train_step();
    auto params = t.model().named_parameters();
    if (rank() == 1) params[2].second.detach().fill_(std::nanf(""));
    std::vector<std::vector<float>> good;
    for (const auto& [name, p] : params) good.push_back(p.to(Device::cpu()).to_vector());
    for (int i = 0; i < 3; ++i) t.train_step();
    t.sync_device_metrics();
    ASSERT_EQ(t.history().size(), 5u) << layout.str();
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(t.history()[i].skipped, i >= 2) << layout.str() << " step " << i + 1;
    EXPECT_EQ(t.optimizer().steps_taken(), 2) << layout.str();
    for (size_t i = 0; i < params.size(); ++i)
      if (i != 2)
        EXPECT_EQ(params[i].second.to(Device::cpu()).to_vector(), good[i])
            << layout.str() << " " << params[i].first;
  }
}

TEST_F(TrainerDevice, LayoutsWithoutWhatTheyNeedAreClearErrors) {
  const auto error_of = [](auto&& make) -> std::string {
    try {
      make();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected braid::Error, nothing was thrown";
    return "";
  };
  // No device communicators handed in.
  const std::string none = error_of([&] {
    train::Trainer trainer(config({1, 2, false, "ddp", "cuda"}), world_ptr());
  });
  EXPECT_NE(none.find("training.device \"cuda\" with parallel.tp=1 dp=2 needs device "
                      "communicators, and this Trainer was given none: link braid_nccl"),
            std::string::npos)
      << none;
}

}  // namespace
}  // namespace braid::dist::testing
