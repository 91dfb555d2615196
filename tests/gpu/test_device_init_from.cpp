// model.init_from on a device (training.device: cuda, or the SIMT emulator): the Trainer loads
// the GPT-2 weights on the host before moving the model, so the device parameters hold exactly
// the file's values. Skips without a device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "braid/ckpt/gpt2_names.h"
#include "braid/core/safetensors.h"
#include "braid/data/token_shard.h"
#include "braid/nn/gpt.h"
#include "braid/train/trainer.h"

#ifdef BRAID_WITH_CUDA
#include "cuda_runtime.cuh"
#endif

#ifndef BRAID_WITH_CUDA

TEST(DeviceInitFrom, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA";
}

#else

namespace braid {
namespace {

namespace fs = std::filesystem;

std::vector<uint32_t> bits(const Tensor& t) {
  const Tensor dense = t.contiguous();
  std::vector<uint32_t> out(static_cast<size_t>(dense.numel()));
  std::memcpy(out.data(), dense.data_ptr(), out.size() * sizeof(uint32_t));
  return out;
}

TEST(DeviceInitFrom, TheDeviceParametersHoldTheFilesWeights) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const fs::path dir =
      fs::temp_directory_path() / ("braid_device_init_from_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
  data::write_token_shard(dir / "train_000.bin", std::span<const int32_t>(tokens));

  nn::GptConfig shape;
  shape.vocab_size = 257;
  shape.n_layer = 2;
  shape.n_head = 2;
  shape.n_embd = 32;
  shape.block_size = 16;
  nn::Gpt original(shape);
  original.init_weights(7);
  std::vector<std::pair<std::string, Tensor> > tensors;
  for (const auto& [name, param] : original.named_parameters()) {
    const auto target = ckpt::gpt2_name(name);
    ASSERT_TRUE(target.has_value()) << name;
    tensors.emplace_back(target->name, ckpt::to_gpt2(*target, param, shape.vocab_size));
  }
  const fs::path file = dir / "gpt2.safetensors";
  save_safetensors(file.string(), tensors);

  train::Trainer trainer(train::parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 init_from: "{}" }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
training {{ steps: 2 batch_size: 2 seq_len: 16 log_every: 100 seed: 3 device: "cuda" }}
)",
                                                         file.string(), dir.string()),
                                             "device_init_from"));
  const auto expected = original.named_parameters();
  const auto loaded = trainer.model().named_parameters();
  ASSERT_EQ(loaded.size(), expected.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    ASSERT_EQ(loaded[i].first, expected[i].first);
    EXPECT_FALSE(loaded[i].second.device().is_cpu()) << loaded[i].first;
    EXPECT_EQ(bits(loaded[i].second.to(Device::cpu())), bits(expected[i].second))
        << loaded[i].first;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_CUDA
