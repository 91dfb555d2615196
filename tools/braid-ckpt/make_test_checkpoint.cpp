// braid-ckpt-make-test: writes a small real checkpoint (2 training steps of a tiny GPT on a byte
// token shard) for the braid-ckpt test, so the test needs no example binaries.
//   braid-ckpt-make-test DIR   ->  DIR/train_000.bin, DIR/ckpt/step_00000002/, DIR/ckpt/latest
//   braid-ckpt-make-test --replace-config STEP_FOLDER TEXT_FILE
//       replaces the training config a checkpoint records, e.g. with one that no longer parses
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/data/token_shard.h"
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

}  // namespace

int main(int argc, char** argv) {
  const bool replace = argc == 4 && std::string(argv[1]) == "--replace-config";
  if (argc != 2 && !replace) {
    std::fprintf(stderr,
                 "usage: braid-ckpt-make-test DIR\n"
                 "       braid-ckpt-make-test --replace-config STEP_FOLDER TEXT_FILE\n");
    return 2;
  }
  try {
    if (replace) {
      replace_config(argv[2], argv[3]);
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
