// braid-ckpt-make-test: writes a small real checkpoint (2 training steps of a tiny GPT on a byte
// token shard) for the braid-ckpt test, so the test needs no example binaries.
//   braid-ckpt-make-test DIR   ->  DIR/train_000.bin, DIR/ckpt/step_00000002/, DIR/ckpt/latest
//   braid-ckpt-make-test --replace-config STEP_FOLDER TEXT_FILE
//       replaces the training config a checkpoint records, e.g. with one that no longer parses
//   braid-ckpt-make-test --logits CKPT OUT_FILE
//       the logits of a fixed window under the model CKPT holds, as raw f32, into OUT_FILE
//   braid-ckpt-make-test --train DIR resume|init_from PATH [--set FIELD=VALUE ...]
//       2 steps of the same run from checkpoint PATH or from GPT-2 weights PATH; prints each
//       step's loss exactly (hexadecimal)
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "braid/ckpt/checkpoint.h"
#include "braid/core/error.h"
#include "braid/data/token_shard.h"
#include "braid/nn/gpt.h"
#include "braid/optim/optimizer.h"
#include "braid/train/trainer.h"
#include "ckpt/format.h"
#include "proto/checkpoint.pb.h"

namespace {

namespace fs = std::filesystem;

// Tiny on purpose (the test must stay fast); vocab 257 pads to 320 rows, so export has padding
// to drop. The shell test relies on these numbers: vocab_size 257, n_embd 32, n_layer 2.
constexpr const char* kConfig = R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 }}
training {{ steps: 2 batch_size: 4 seq_len: 16 val_every: 0 log_every: 100 seed: 3 }}
checkpoint {{ dir: "{}" mode: "sync" keep: 1 }}
)";

void write_tokens(const fs::path& dir) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
  braid::data::write_token_shard(dir / "train_000.bin", std::span<const int32_t>(tokens));
}

// Stands in for a checkpoint written by an older braid whose config schema has changed since.
void replace_config(const fs::path& folder, const fs::path& text_file) {
  std::ifstream in(text_file);
  BRAID_CHECK(in.good(), "cannot read {}", text_file.string());
  std::stringstream text;
  text << in.rdbuf();
  braid::ckpt::proto::Manifest manifest;
  braid::ckpt::read_message(folder / braid::ckpt::kManifestFile, manifest);
  manifest.set_config(text.str());
  braid::ckpt::write_message(folder / braid::ckpt::kManifestFile, manifest);
}

// The checkpoint's model (shape from its stored config) on a fixed window of ids.
void write_logits(const std::string& checkpoint, const fs::path& out) {
  const std::string folder = braid::ckpt::resolve_checkpoint(checkpoint);
  braid::ckpt::proto::Manifest manifest;
  braid::ckpt::read_message(fs::path(folder) / braid::ckpt::kManifestFile, manifest);
  const braid::train::TrainConfig config =
      braid::train::parse_config(manifest.config(), folder + " (config)");
  braid::nn::Gpt model(braid::train::gpt_config(config));
  auto optimizer = braid::optim::make_optimizer(
      "adamw", braid::optim::decay_groups(model.named_parameters(), 0.0f), {}, 0.0f);
  braid::ckpt::load_checkpoint(folder, model, *optimizer, braid::ckpt::Layout{});
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < model.config().block_size; ++i)
    ids.push_back(static_cast<int32_t>((i * 37 + 11) % model.config().vocab_size));
  const braid::Tensor logits =
      model.forward(braid::Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())}));
  const std::vector<float> values = logits.to_vector();
  std::ofstream file(out, std::ios::binary);
  file.write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(float)));
  BRAID_CHECK(file.good(), "cannot write {}", out.string());
}

// The test's run (without checkpoints) from `path`: resumed from a checkpoint or initialised
// from GPT-2 weights.
void train_from(const fs::path& dir, const std::string& how, const std::string& path,
                const std::vector<std::string>& overrides) {
  BRAID_CHECK(how == "resume" || how == "init_from", "expected resume or init_from, got '{}'", how);
  braid::train::TrainConfig config = braid::train::parse_config(
      fmt::format(fmt::runtime(kConfig), dir.string(), ""), "braid-ckpt-make-test");
  braid::train::set_field(config, how == "resume" ? "resume" : "model.init_from", path);
  const std::vector<std::string> rest = braid::train::apply_overrides(config, overrides);
  BRAID_CHECK(rest.empty(), "unknown argument '{}'", rest.empty() ? "" : rest.front());
  braid::train::Trainer trainer(config);
  for (int i = 0; i < 2; ++i) {
    const braid::train::StepMetrics m = trainer.train_step();
    std::printf("step %lld loss %a\n", static_cast<long long>(m.step + 1), m.loss);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool replace = argc == 4 && mode == "--replace-config";
  const bool logits = argc == 4 && mode == "--logits";
  const bool train = argc >= 5 && mode == "--train";
  if (argc != 2 && !replace && !logits && !train) {
    std::fprintf(stderr,
                 "usage: braid-ckpt-make-test DIR\n"
                 "       braid-ckpt-make-test --replace-config STEP_FOLDER TEXT_FILE\n"
                 "       braid-ckpt-make-test --logits CKPT OUT_FILE\n"
                 "       braid-ckpt-make-test --train DIR resume|init_from PATH "
                 "[--set FIELD=VALUE ...]\n");
    return 2;
  }
  try {
    if (replace) {
      replace_config(argv[2], argv[3]);
      return 0;
    }
    if (logits) {
      write_logits(argv[2], argv[3]);
      return 0;
    }
    if (train) {
      train_from(fs::absolute(argv[2]), argv[3], argv[4],
                 std::vector<std::string>(argv + 5, argv + argc));
      return 0;
    }
    const fs::path dir = fs::absolute(argv[1]);
    fs::create_directories(dir);
    write_tokens(dir);
    const std::string text =
        fmt::format(fmt::runtime(kConfig), dir.string(), (dir / "ckpt").string());
    braid::train::Trainer trainer(braid::train::parse_config(text, "braid-ckpt-make-test"));
    for (int i = 0; i < 2; ++i) trainer.train_step();
    trainer.save_checkpoint();
    trainer.wait_for_checkpoint();
    std::printf("checkpoint written under %s\n", (dir / "ckpt").c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-ckpt-make-test: error: %s\n", e.what());
    return 1;
  }
}
