// braid-ckpt-make-test: writes a small real checkpoint (2 training steps of a tiny GPT on a byte
// token shard) for the braid-ckpt test, so the test needs no example binaries.
//   braid-ckpt-make-test DIR   ->  DIR/train_000.bin, DIR/ckpt/step_00000002/, DIR/ckpt/latest
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <span>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/train/trainer.h"

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: braid-ckpt-make-test DIR\n");
    return 2;
  }
  try {
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
