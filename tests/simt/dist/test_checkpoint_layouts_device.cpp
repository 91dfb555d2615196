// Checkpoints between device layouts and one CPU process, over 2 ranks on the emulated devices
// (stand-in transport): saved by tp=2 or dp=2 ZeRO-1 on the devices, loaded into one CPU
// process, and saved by one CPU process, loaded by those layouts on the devices. Weights and
// Adam moments equal to the bit, slice by slice, and training continues alike.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "braid/train/trainer.h"
#include "dist/nccl_process_group.h"
#include "training_equivalence.h"
#include "two_device_test.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

struct DeviceLayout {
  int tp = 1, dp = 1;
  std::string strategy = "auto";
  std::string str() const { return fmt::format("cuda tp={} dp={} {}", tp, dp, strategy); }
};

// A run's weights and moments by parameter name, on the host, whole or this rank's slice.
struct State {
  std::map<std::string, Tensor> weights;
  std::map<std::string, std::vector<Tensor>> moments;
  std::map<std::string, int64_t> steps;
};

State state_of(train::Trainer& t) {
  // ZeRO-1 keeps the live moments in its shards: gathered into the optimizer's to compare.
  t.strategy().gather_optimizer_state(t.optimizer());
  State s;
  for (const auto& [name, p] : t.model().named_parameters())
    s.weights[name] = p.to(Device::cpu()).contiguous();
  optim::Optimizer& opt = t.optimizer();
  for (size_t i = 0; i < opt.params().size(); ++i) {
    const std::string& name = opt.params()[i].name;
    for (const auto& [what, m] : opt.param_state(i))
      s.moments[name].push_back(m.to(Device::cpu()).contiguous());
    s.steps[name] = opt.param_steps(i);
  }
  return s;
}

// `part` (a layout's rank) against `whole` (one process) cut to each parameter's shard.
void expect_slices_bitwise(const State& part, const State& whole,
                           const std::map<std::string, nn::ShardSpec>& specs,
                           const std::string& what) {
  ASSERT_EQ(part.weights.size(), whole.weights.size()) << what;
  for (const auto& [name, w] : part.weights) {
    const nn::ShardSpec& spec = specs.at(name);
    EXPECT_EQ(w.to_vector(), slice_of_reference(whole.weights.at(name), spec).to_vector())
        << what << " weight " << name;
    const std::vector<Tensor>& mine = part.moments.at(name);
    const std::vector<Tensor>& reference = whole.moments.at(name);
    ASSERT_EQ(mine.size(), reference.size()) << what << " " << name;
    for (size_t k = 0; k < mine.size(); ++k)
      EXPECT_EQ(mine[k].to_vector(), slice_of_reference(reference[k], spec).to_vector())
          << what << " moment " << k << " of " << name;
    EXPECT_EQ(part.steps.at(name), whole.steps.at(name)) << what << " steps of " << name;
  }
}

std::vector<float> losses(train::Trainer& t, int steps) {
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.train_step().loss);
  t.sync_device_metrics();
  const auto& history = t.history();
  for (int i = 0; i < steps; ++i) out[i] = history[history.size() - steps + i].loss;
  return out;
}

void expect_close_losses(const std::vector<float>& actual, const std::vector<float>& expected,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_LE(std::fabs(actual[i] - expected[i]), 1e-5 * std::fabs(expected[i]))
        << what << " step " << i + 1 << " after the load";
}

class CheckpointLayoutsDevice : public TwoDeviceTest {
 protected:
  void SetUp() override {
    TwoDeviceTest::SetUp();
    if (IsSkipped()) return;
    data_ = write_corpus("braid_ckl_device_", rank());
    // One folder every rank agrees on: named after rank 0's process.
    Tensor pid = Tensor::full({1}, static_cast<float>(::getpid()));
    world().broadcast(pid, 0)->wait();
    ckpt_ = fs::temp_directory_path() /
            fmt::format("braid_ckl_device_{}_{}", static_cast<int64_t>(pid.item()),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    if (!data_.empty()) {
      world().barrier()->wait();
      fs::remove_all(data_);
      if (rank() == 0) fs::remove_all(ckpt_);
    }
    TwoDeviceTest::TearDown();
  }

  // A 4-layer tiny GPT over bytes, 4 sequences of 16 tokens per step, AdamW with clipping;
  // the vocabulary pads to a multiple of tp only, so the layouts differ in padding too.
  train::TrainConfig config(const DeviceLayout& l, bool device, const fs::path& dir,
                            const std::string& resume = "", const std::string& mode = "async") {
    return train::parse_config(fmt::format(R"(
model {{ vocab_size: 257 padded_vocab_multiple: 1 n_layer: 4 n_head: 4 n_embd: 32
        block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 3e-3 weight_decay: 0.1 grad_clip: 1.0 warmup_steps: 2 }}
training {{ steps: 40 batch_size: {} seq_len: 16 val_every: 0 seed: 5 device: "{}" }}
parallel {{ tp: {} dp: {} strategy: "{}" }}
checkpoint {{ dir: "{}" mode: "{}" window: 2 }}
resume: "{}"
)",
                                           data_.string(), 4 / l.dp, device ? "cuda" : "cpu", l.tp,
                                           l.dp, l.strategy, dir.string(), mode, resume),
                               "test");
  }
  std::unique_ptr<train::Trainer> on_devices(const DeviceLayout& l, const fs::path& dir,
                                             const std::string& resume = "",
                                             const std::string& mode = "async") {
    return std::make_unique<train::Trainer>(config(l, true, dir, resume, mode), world_ptr(),
                                            nccl_group_factory);
  }
  // One CPU process that every rank runs at once, in a checkpoint folder of its own (one
  // folder takes one run at a time); it loads the shared checkpoints through a resume path.
  std::unique_ptr<train::Trainer> one_cpu_process(const std::string& resume = "") {
    return std::make_unique<train::Trainer>(
        config({}, false, ckpt_ / fmt::format("solo_rank_{}", rank()), resume), nullptr);
  }

  fs::path data_, ckpt_;
};

const std::vector<DeviceLayout> kLayouts{{2, 1}, {1, 2, "zero1"}};

// Saved on the devices (async, and overlapped with a window of 2 steps that replays AdamW on
// the host), loaded into one CPU process: its state cut to each rank's slices is the devices'
// state to the bit, and it trains on like the layout that saved it.
TEST_F(CheckpointLayoutsDevice, DeviceCheckpointsLoadIntoOneCpuProcess) {
  for (const std::string mode : {"async", "overlapped"}) {
    for (const DeviceLayout& l : kLayouts) {
      const std::string what = fmt::format("{} saved {}", l.str(), mode);
      const fs::path dir = ckpt_ / fmt::format("{}_tp{}_dp{}", mode, l.tp, l.dp);
      auto saving = on_devices(l, dir, "", mode);
      losses(*saving, 3);
      saving->save_checkpoint();
      // The overlapped window of 2 copies one block per step from the save's step on: the
      // checkpoint holds the state after the step that copies the last block.
      const int landing = mode == "async" ? 3 : 4;
      losses(*saving, landing - 3);
      saving->wait_for_checkpoint();
      const State saved = state_of(*saving);
      const auto specs = saving->model().shard_specs();
      const std::vector<float> continued = losses(*saving, 3);

      auto loaded = one_cpu_process(dir.string());
      ASSERT_EQ(loaded->step(), landing) << what;
      expect_slices_bitwise(saved, state_of(*loaded), specs, what);
      expect_close_losses(losses(*loaded, 3), continued, what);
    }
  }
}

// Saved by one CPU process, loaded by each layout on the devices: every rank's weights and
// moments are that process's, cut to its slices, to the bit, and training continues alike.
TEST_F(CheckpointLayoutsDevice, OneCpuProcessCheckpointsLoadOntoTheDevices) {
  const fs::path dir = ckpt_ / "from_cpu";
  std::vector<float> continued;
  if (rank() == 0) {
    train::Trainer saving(config({}, false, dir), nullptr);
    losses(saving, 3);
    saving.save_checkpoint();
    saving.wait_for_checkpoint();
    continued = losses(saving, 3);
  }
  world().barrier()->wait();
  auto whole = one_cpu_process(dir.string());
  const State reference = state_of(*whole);
  if (rank() != 0) continued = losses(*whole, 3);
  for (const DeviceLayout& l : kLayouts) {
    auto loaded = on_devices(l, ckpt_ / fmt::format("loaded_tp{}_dp{}", l.tp, l.dp), dir.string());
    ASSERT_EQ(loaded->step(), 3) << l.str();
    EXPECT_EQ(loaded->model().named_parameters().begin()->second.device(), loaded->device());
    expect_slices_bitwise(state_of(*loaded), reference, loaded->model().shard_specs(), l.str());
    expect_close_losses(losses(*loaded, 3), continued, l.str() + " loaded from one CPU process");
  }
}

}  // namespace
}  // namespace braid::dist::testing
