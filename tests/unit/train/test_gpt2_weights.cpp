// GPT-2 weights (Hugging Face names) in and out of braid: a model written under GPT-2 names
// and read back gives the same logits to the bit; model.init_from starts a Trainer from exactly
// those weights; the PyTorch fixture's weights under GPT-2 names give PyTorch's logits; each
// tensor-parallel rank and pipeline stage takes exactly its slices; a file with missing, extra or
// mis-shaped tensors gets one error listing each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "braid/ckpt/gpt2_names.h"
#include "braid/ckpt/gpt2_weights.h"
#include "braid/core/safetensors.h"
#include "braid/nn/gpt.h"
#include "braid/nn/tensor_parallel.h"
#include "braid/train/trainer.h"
#include "checkpoint_fixture.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, Tensor>>;

// vocab 257 pads to 320 rows, so the padding is exercised.
nn::GptConfig tiny() {
  nn::GptConfig c;
  c.vocab_size = 257;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  return c;
}

std::vector<uint32_t> bits(const Tensor& t) {
  const Tensor dense = t.contiguous();
  std::vector<uint32_t> out(static_cast<size_t>(dense.numel()));
  std::memcpy(out.data(), dense.data_ptr(), out.size() * sizeof(uint32_t));
  return out;
}

// The single-process model's tensors under GPT-2 names and orientation, through the mapping
// braid-ckpt export uses; `prefix` is put before each name.
Named gpt2_tensors_of(const nn::Gpt& model, const std::string& prefix = "") {
  Named out;
  for (const auto& [name, param] : model.named_parameters()) {
    const std::optional<ckpt::Gpt2Name> target = ckpt::gpt2_name(name);
    EXPECT_TRUE(target.has_value()) << name;
    out.emplace_back(prefix + target->name,
                     ckpt::to_gpt2(*target, param, model.config().vocab_size));
  }
  return out;
}

Tensor find(const Named& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

class Gpt2WeightsTest : public CheckpointFolderTest {
 protected:
  void SetUp() override {
    CheckpointFolderTest::SetUp();
    original_ = std::make_unique<nn::Gpt>(tiny());
    original_->init_weights(7);
    path_ = (dir_ / "gpt2.safetensors").string();
    save_safetensors(path_, gpt2_tensors_of(*original_));
  }
  // The error a load of `tensors` into the tiny model throws ("" when it loads).
  std::string load_error(const Named& tensors) {
    const std::string path = (dir_ / "bad.safetensors").string();
    save_safetensors(path, tensors);
    nn::Gpt model(tiny());
    try {
      ckpt::load_gpt2_weights(path, model);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void expect_params_equal_original(const nn::Gpt& model) {
    const auto original = original_->named_parameters();
    for (const auto& [name, param] : model.named_parameters()) {
      const Tensor* whole = nullptr;
      for (const auto& [n, t] : original)
        if (n == name) whole = &t;
      ASSERT_NE(whole, nullptr) << name;
      EXPECT_EQ(bits(param), bits(*whole)) << name;
    }
  }

  std::unique_ptr<nn::Gpt> original_;
  std::string path_;
};

Tensor ids_window() {
  std::vector<int32_t> ids;
  for (int i = 0; i < 16; ++i) ids.push_back((i * 37 + 11) % 257);
  return Tensor::from_vector(ids, {1, 16});
}

TEST_F(Gpt2WeightsTest, WrittenAndReadBackGivesTheSameLogitsBitwise) {
  const SafetensorsFile file = load_safetensors(path_);
  EXPECT_EQ(file.entry("h.0.attn.c_attn.weight").shape, (Shape{32, 96}));  // Conv1D [in, out]
  EXPECT_EQ(file.entry("wte.weight").shape, (Shape{257, 32}));             // padding cut
  nn::Gpt loaded(tiny());
  loaded.init_weights(99);  // other values everywhere, so every one must be overwritten
  ckpt::load_gpt2_weights(path_, loaded);
  expect_params_equal_original(loaded);
  EXPECT_EQ(bits(loaded.forward(ids_window())), bits(original_->forward(ids_window())));
}

// PyTorch's logits (tests/reference/gpt_tiny.safetensors, float64 stored as f32) from the
// fixture's weights written under GPT2LMHeadModel's names and loaded back: within the fp32
// bound the parity test uses (normwise relative error <= 1e-5).
TEST_F(Gpt2WeightsTest, FixtureWeightsUnderGpt2NamesGivePyTorchsLogits) {
  const SafetensorsFile fixture =
      load_safetensors(std::string(BRAID_FIXTURE_DIR) + "/gpt_tiny.safetensors");
  nn::GptConfig c = tiny();
  c.vocab_size = 97;
  c.n_head = 4;
  Named tensors;
  nn::Gpt shape_only(c);
  for (const auto& [name, param] : shape_only.named_parameters())
    tensors.emplace_back("transformer." + ckpt::gpt2_name(name)->name,
                         ckpt::to_gpt2(*ckpt::gpt2_name(name), fixture.get(name), c.vocab_size));
  const std::string path = (dir_ / "fixture_gpt2.safetensors").string();
  save_safetensors(path, tensors);
  nn::Gpt model(c);
  ckpt::load_gpt2_weights(path, model);
  const std::vector<float> ours = model.forward(fixture.get("input_ids")).to_vector();
  const std::vector<float> torch = fixture.get("logits").to_vector();
  ASSERT_EQ(ours.size(), torch.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(ours[i]) - torch[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(torch[i])));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff / scale, 1e-5);
}

TEST_F(Gpt2WeightsTest, AcceptsThePrefixTheBuffersAndATiedHeadEqualToWte) {
  Named tensors = gpt2_tensors_of(*original_, "transformer.");
  for (int i = 0; i < 2; ++i) {
    tensors.emplace_back(fmt::format("transformer.h.{}.attn.bias", i),
                         Tensor::full({1, 1, 16, 16}, 1.0f));
    tensors.emplace_back(fmt::format("transformer.h.{}.attn.masked_bias", i),
                         Tensor::full({1}, -1e4f));
  }
  tensors.emplace_back("lm_head.weight", find(tensors, "transformer.wte.weight").clone());
  ASSERT_EQ(load_error(tensors), "");
  nn::Gpt loaded(tiny());
  ckpt::load_gpt2_weights((dir_ / "bad.safetensors").string(), loaded);
  expect_params_equal_original(loaded);
  // The shape read off the same file.
  const nn::GptConfig inferred =
      ckpt::infer_gpt2_config(load_safetensors((dir_ / "bad.safetensors").string()), 2);
  EXPECT_EQ(inferred.vocab_size, 257);
  EXPECT_EQ(inferred.n_layer, 2);
  EXPECT_EQ(inferred.n_embd, 32);
  EXPECT_EQ(inferred.block_size, 16);
  EXPECT_EQ(inferred.n_head, 2);
  EXPECT_TRUE(inferred.tie_embeddings);
}

TEST_F(Gpt2WeightsTest, InitFromStartsTheTrainerFromExactlyTheseWeights) {
  const TrainConfig config = parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 init_from: "{}" }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
training {{ steps: 2 batch_size: 4 seq_len: 16 log_every: 100 seed: 3 }}
)",
                                                      path_, dir_.string()),
                                          "test");
  Trainer trainer(config);
  expect_params_equal_original(trainer.model());
  // A path that is no file is a config error naming the field.
  TrainConfig wrong = config;
  set_field(wrong, "model.init_from", (dir_ / "missing.safetensors").string());
  try {
    validate(wrong);
    FAIL() << "validate accepted a missing model.init_from";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.init_from"), std::string::npos) << e.what();
  }
}

TEST_F(Gpt2WeightsTest, EachTensorParallelRankAndPipelineStageTakesItsSlices) {
  const auto original = original_->named_parameters();
  auto whole_of = [&](const std::string& name) {
    for (const auto& [n, t] : original)
      if (n == name) return t;
    ADD_FAILURE() << "no parameter " << name;
    return Tensor();
  };
  for (int rank = 0; rank < 2; ++rank) {
    nn::Gpt shard(tiny(), std::make_shared<nn::LayoutOnlyTensorParallel>(rank, 2));
    ckpt::load_gpt2_weights(path_, shard);
    const auto specs = shard.shard_specs();
    int sliced = 0;
    for (const auto& [name, param] : shard.named_parameters()) {
      const nn::ShardSpec& spec = specs.at(name);
      const Tensor whole = whole_of(name);
      ASSERT_EQ(spec.global_shape, whole.shape()) << name;  // 320 rows for tp = 1 and 2 alike
      sliced += spec.is_whole() ? 0 : 1;
      EXPECT_EQ(bits(param), bits(spec.slice(whole))) << name << " on tp rank " << rank;
    }
    EXPECT_GT(sliced, 8) << "tp = 2 should split the embeddings, attention and MLP";
  }
  // The last of two pipeline stages: block 1, ln_f and its own copy of the tied wte.
  nn::GptStagePart last{{{1, 2}}, /*embeddings=*/false, /*head=*/true};
  nn::Gpt stage(tiny(), nullptr, last);
  ckpt::load_gpt2_weights(path_, stage);
  expect_params_equal_original(stage);
  EXPECT_NE(stage.named_parameters().size(), original.size());
}

TEST_F(Gpt2WeightsTest, EveryProblemOfAFileIsListedInOneError) {
  const Named good = gpt2_tensors_of(*original_);
  // One of each: missing, extra, mis-shaped (transposed), a tied head that differs from wte.
  Named bad;
  for (const auto& [name, t] : good) {
    if (name == "h.1.mlp.c_fc.weight") continue;
    bad.emplace_back(name, name == "h.0.attn.c_attn.weight" ? t.transpose(0, 1).contiguous() : t);
  }
  bad.emplace_back("h.2.ln_1.weight", Tensor::full({32}, 1.0f));
  bad.emplace_back("lm_head.weight", Tensor::zeros({257, 32}));
  const std::string error = load_error(bad);
  EXPECT_NE(error.find("4 problems:"), std::string::npos) << error;
  EXPECT_NE(error.find("\n  missing h.1.mlp.c_fc.weight: expected [32, 128]\n"), std::string::npos)
      << error;
  EXPECT_NE(error.find("\n  h.0.attn.c_attn.weight is [96, 32], expected [32, 96] (transposed"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("\n  extra h.2.ln_1.weight [32]: "), std::string::npos) << error;
  EXPECT_NE(error.find("\n  lm_head.weight [257, 32] differs from wte.weight"), std::string::npos)
      << error;

  // Each alone: exactly one problem, naming the tensor.
  Named missing(good.begin() + 1, good.end());  // no wte.weight
  EXPECT_NE(load_error(missing).find("1 problem:\n  missing wte.weight: expected [257, 32]"),
            std::string::npos)
      << load_error(missing);
  Named extra = good;
  extra.emplace_back("h.0.attn.rotary", Tensor::full({4}, 1.0f));
  EXPECT_NE(load_error(extra).find("1 problem:\n  extra h.0.attn.rotary [4]"), std::string::npos)
      << load_error(extra);
  Named misshaped = good;
  for (auto& [name, t] : misshaped)
    if (name == "wpe.weight") t = Tensor::zeros({8, 32});
  EXPECT_NE(load_error(misshaped).find("1 problem:\n  wpe.weight is [8, 32], expected [16, 32]"),
            std::string::npos)
      << load_error(misshaped);
  Named twice = good;
  twice.emplace_back("transformer.ln_f.bias", find(good, "ln_f.bias").clone());
  EXPECT_NE(load_error(twice).find("ln_f.bias is stored twice"), std::string::npos)
      << load_error(twice);
}

}  // namespace
}  // namespace braid::train
