// The fixture of the device-training tests: a token shard in a scratch directory, the tiny
// GPT's config for the CPU or the device, and helpers. Every test skips without a device.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "braid/core/allocator.h"
#include "braid/core/device_count.h"
#include "braid/data/token_shard.h"
#include "braid/ops/kernel_registry.h"
#include "braid/train/trainer.h"
#ifdef BRAID_SIMT
#include "simt/emulated_device.h"
#endif

namespace braid::train::device_training {

namespace fs = std::filesystem;

inline bool have_cuda_device() {
  ops::KernelRegistry::instance();  // the CUDA backend registers its device count with it
  return device_count(DeviceKind::cuda) > 0;
}

class DeviceTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_SKIP() << "no CUDA device";
    dir_ = fs::temp_directory_path() /
           ("braid_device_training_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
    data::write_token_shard(dir_ / "val_000.bin", std::span<const int32_t>(tokens));
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The tiny GPT of the strategy-seam test; grad_accum 2 exercises the device loss sum.
  TrainConfig config(const std::string& device, int steps, bool skip_nonfinite = false,
                     int log_every = 1) const {
    return parse_config(
        fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{0}/train_*.bin" val_pattern: "{0}/val_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 weight_decay: 0.1 }}
training {{ steps: {2} batch_size: 2 grad_accum_steps: 2 seq_len: 16 val_steps: 2 seed: 3
            device: "{1}" skip_nonfinite_steps: {3} log_every: {4} peak_flops: 1e12 }}
)",
                    dir_.string(), device, steps, skip_nonfinite ? "true" : "false", log_every),
        "device_training");
  }

  fs::path dir_;
};

inline std::vector<float> host_values(const Tensor& t) {
  return t.to(Device::cpu()).to_vector();
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

}  // namespace braid::train::device_training
