// The training job of the checkpoint fault trials (tests/dist/checkpoint_faults.sh): trains a
// tiny GPT with checkpoints every 2 steps and resume: latest, so a crash injected through
// BRAID_CKPT_FAULT can strike anywhere in the protocol; with --verify it loads the latest
// committed checkpoint (no fallback), which must verify, and trains one more step from it.
// A stop signal checkpoints and exits 75; a checkpoint folder in use by another run exits 2.
//   braid_fault_checkpoint --dir CKPT --data DATA --mode sync|async|overlapped [--steps 8]
//                          [--keep 3] [--tp T] [--pp P] [--strategy auto|ddp|zero1] [--verify]
//                          [--losses]   (dp = ranks / (tp x pp); --losses prints each step's)
//                          [--device cpu|cuda]   (cuda: one rank; braid_simt_fault_checkpoint
//                          trains on the emulated device)
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "braid/ckpt/checkpoint.h"
#include "braid/ckpt/run_lock.h"
#include "braid/core/command_line.h"
#include "braid/data/token_shard.h"
#include "braid/dist/bootstrap.h"
#include "braid/train/stop_signals.h"
#include "braid/train/trainer.h"

int main(int argc, char** argv) {
  using namespace braid;
  dist::Environment* env = nullptr;
  try {
    env = &dist::init(&argc, &argv);
    std::map<std::string, std::string> flags = {
        {"dir", ""},     {"data", ""},    {"mode", "sync"}, {"steps", "8"},
        {"keep", "3"},   {"tp", "1"},     {"pp", "1"},      {"strategy", "auto"},
        {"verify", "0"}, {"losses", "0"}, {"device", "cpu"}};
    for (int i = 1; i < argc; ++i) {
      const std::string key = std::string(argv[i]).substr(2);
      BRAID_CHECK(flags.count(key), "unknown flag {}", argv[i]);
      const bool is_switch = key == "verify" || key == "losses";
      BRAID_CHECK(is_switch || i + 1 < argc, "flag {} needs a value", argv[i]);
      flags[key] = is_switch ? "1" : argv[++i];
    }
    const std::filesystem::path data = flags["data"];
    if (env->world()->rank() == 0 && !std::filesystem::exists(data / "train_000.bin")) {
      std::filesystem::create_directories(data);
      std::vector<int32_t> tokens;
      for (int i = 0; i < 4000; ++i) tokens.push_back(32 + (i * 13 + i / 5) % 90);
      data::write_token_shard(data / "train_000.bin", std::span<const int32_t>(tokens));
    }
    env->world()->barrier()->wait();
    const int tp = std::stoi(flags["tp"]), pp = std::stoi(flags["pp"]);
    const int dp = env->world()->size() / (tp * pp);
    const std::string config =
        fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-3 grad_clip: 1.0 }}
training {{ steps: {} batch_size: 2 seq_len: 16 val_every: 0 log_every: 100 device: "{}" }}
parallel {{ tp: {} pp: {} dp: {} strategy: "{}" }}
checkpoint {{ dir: "{}" every_steps: 2 mode: "{}" window: 3 keep: {} fallback: false }}
resume: "latest"
)",
                    data.string(), flags["steps"], flags["device"], tp, pp, dp, flags["strategy"],
                    flags["dir"], flags["mode"], flags["keep"]);
    bool trainer_stopped = false;
    train::Trainer trainer(train::parse_config(config, "fault_checkpoint"), env->world());
    if (flags["verify"] == "1") {
      // The Trainer just loaded (and checksummed) the newest committed checkpoint, if any.
      const int64_t step = trainer.step();
      trainer.train_step();
      if (env->world()->rank() == 0)
        std::printf("verified: resumed at step %lld\n", (long long)step);
    } else {
      const int64_t first = trainer.step();
      trainer.fit();
      trainer_stopped = trainer.stopped_by() != 0;
      if (env->world()->rank() == 0) {
        if (flags["losses"] == "1")
          for (const train::StepMetrics& m : trainer.history())
            std::printf("loss %lld %.9g\n", (long long)(m.step + 1), m.loss);
        std::printf("%s %lld steps (from step %lld)\n",
                    trainer.stopped_by() ? "stopped after" : "finished", (long long)trainer.step(),
                    (long long)first);
      }
    }
    dist::finalize();
    return trainer_stopped ? train::kExitStoppedBySignal : 0;
  } catch (const ckpt::DirectoryInUse& e) {
    std::fprintf(stderr, "fault_checkpoint: error: %s\n", e.what());
    dist::finalize();  // every rank learnt it together: no rank is left in a collective
    return kUsageExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_checkpoint: error: %s\n", e.what());
    if (env && env->world_size() > 1) dist::abort_job(1);
    return 1;
  }
}
