// Checkpoints in one process: resuming continues bitwise exactly (sync and async), a saved
// checkpoint never changes when training mutates parameters after save() returns, retention
// keeps the newest, and every kind of damage is detected with an error naming file and
// tensor, falling back to the previous checkpoint when configured.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <vector>

#include "braid/ckpt/checkpoint.h"
#include "braid/ckpt/overlapped_window.h"
#include "braid/data/token_shard.h"
#include "braid/parallel/strategy.h"
#include "braid/train/trainer.h"
#include "checkpoint_fixture.h"
#include "ckpt/format.h"  // the manifest (private to libbraid)
#include "support/test_util.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public CheckpointFolderTest {
 protected:
  TrainConfig config(const std::string& mode, int steps, const std::string& resume = "",
                     const std::string& extra = "") const {
    return parse_config(
        fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 }}
training {{ steps: {} batch_size: 4 seq_len: 16 val_every: 0 log_every: 100 seed: 3 }}
checkpoint {{ dir: "{}" mode: "{}" keep: 2 {} }}
resume: "{}"
)",
                    dir_.string(), steps, (dir_ / "ckpt").string(), mode, extra, resume),
        "test");
  }
  fs::path newest() const { return ckpt::resolve_checkpoint((dir_ / "ckpt").string()); }
};

std::vector<std::vector<float>> parameters_of(Trainer& t) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : t.model().named_parameters()) out.push_back(p.to_vector());
  return out;
}

// 40 steps straight vs 20 steps, a checkpoint, a new Trainer resuming, 20 more: the same
// losses and parameters to the bit. Clipping is active (norms start well above 1).
TEST_F(CheckpointTest, ResumingContinuesBitwiseExactly) {
  for (const std::string mode : {"sync", "async"}) {
    fs::remove_all(dir_ / "ckpt");
    Trainer straight(config(mode, 40));
    std::vector<float> expected;
    for (int i = 0; i < 40; ++i) expected.push_back(straight.train_step().loss);
    EXPECT_GT(straight.history().front().grad_norm, 1.0) << "clipping should be active";

    {
      Trainer first(config(mode, 40));
      for (int i = 0; i < 20; ++i) first.train_step();
      first.save_checkpoint();
      first.wait_for_checkpoint();
    }
    Trainer resumed(config(mode, 40, "latest"));
    ASSERT_EQ(resumed.step(), 20) << mode;
    for (int i = 20; i < 40; ++i)
      EXPECT_EQ(resumed.train_step().loss, expected[i]) << mode << " step " << i + 1;
    EXPECT_EQ(parameters_of(resumed), parameters_of(straight)) << mode;
  }
}

// An asynchronous save copies the state before returning: changing the parameters right
// after it never changes what is written.
TEST_F(CheckpointTest, MutatingParametersAfterSaveDoesNotChangeIt) {
  Trainer t(config("async", 10));
  for (int i = 0; i < 3; ++i) t.train_step();
  const auto saved = parameters_of(t);
  t.save_checkpoint();
  for (const auto& [name, p] : t.model().named_parameters()) p.detach().fill_(7.0f);
  t.wait_for_checkpoint();
  Trainer loaded(config("async", 10, "latest"));
  EXPECT_EQ(parameters_of(loaded), saved);
}

// Sync and async snapshots copy into one buffer, prepared ahead and reused by every save once
// the previous write is done; each checkpoint still holds its own step's state.
TEST_F(CheckpointTest, SnapshotsReuseOnePreparedBufferWithoutMixingCheckpoints) {
  for (const std::string mode : {"sync", "async"}) {
    fs::remove_all(dir_ / "ckpt");
    std::vector<std::vector<std::vector<float>>> saved;
    {
      Trainer t(config(mode, 10));
      t.train_step();
      EXPECT_EQ(t.checkpointer()->snapshot_buffer(), nullptr);
      t.prepare_checkpoint();
      t.wait_for_checkpoint();
      const Storage* prepared = t.checkpointer()->snapshot_buffer();
      ASSERT_NE(prepared, nullptr) << mode;
      for (int save = 0; save < 3; ++save) {
        t.train_step();
        saved.push_back(parameters_of(t));
        t.save_checkpoint();
        for (const auto& [name, p] : t.model().named_parameters()) p.detach().fill_(7.0f + save);
        t.wait_for_checkpoint();
        EXPECT_EQ(t.checkpointer()->snapshot_buffer(), prepared) << mode << " save " << save;
        // Back to the saved values, so that the next step trains on.
        size_t i = 0;
        for (const auto& [name, p] : t.model().named_parameters())
          p.detach().copy_(Tensor::from_vector(saved.back()[i++], p.shape()));
      }
    }
    for (int save = 1; save < 3; ++save) {  // keep: 2
      const std::string folder = (dir_ / "ckpt" / fmt::format("step_{:08d}", save + 2)).string();
      Trainer loaded(config(mode, 10, folder));
      EXPECT_EQ(parameters_of(loaded), saved[save]) << mode << " save " << save;
    }
  }
}

// The overlapped window's replayed state goes to disk through the same prepared buffer.
TEST_F(CheckpointTest, OverlappedWritesThroughThePreparedBuffer) {
  Trainer t(config("overlapped", 10, "", "window: 2"));
  t.train_step();
  t.prepare_checkpoint();
  t.wait_for_checkpoint();
  const Storage* prepared = t.checkpointer()->snapshot_buffer();
  ASSERT_NE(prepared, nullptr);
  for (int window = 0; window < 2; ++window) {
    t.save_checkpoint();  // opens the window; it lands after the next step
    t.train_step();
    const auto landed = parameters_of(t);
    t.wait_for_checkpoint();
    EXPECT_EQ(t.checkpointer()->snapshot_buffer(), prepared) << "window " << window;
    Trainer loaded(config("overlapped", 10, newest().string()));
    EXPECT_EQ(loaded.step(), t.step());
    EXPECT_EQ(parameters_of(loaded), landed) << "window " << window;
  }
}

// fit() checkpoints every N steps and at the end, keeps the newest `keep`, and a restarted
// run with resume "latest" picks up where the last committed one left off.
TEST_F(CheckpointTest, FitSavesPeriodicallyKeepsTheNewestAndResumes) {
  {
    Trainer t(config("async", 7, "latest", "every_steps: 3"));
    t.fit();
  }
  std::vector<std::string> names;
  for (const auto& p : fs::directory_iterator(dir_ / "ckpt")) names.push_back(p.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "lock", "step_00000006", "step_00000007"}));
  Trainer again(config("async", 9, "latest", "every_steps: 3"));
  EXPECT_EQ(again.step(), 7);
  again.fit();
  EXPECT_EQ(again.step(), 9);
}

// Damage of every kind names the file and tensor; with fallback the previous checkpoint loads.
TEST_F(CheckpointTest, DamageIsDetectedAndFallsBack) {
  {
    Trainer t(config("sync", 10));
    t.train_step();
    t.save_checkpoint();  // step 1
    t.train_step();
    t.save_checkpoint();  // step 2: the one we damage
  }
  const fs::path step2 = newest();
  ASSERT_EQ(step2.filename(), "step_00000002");
  const fs::path data = step2 / "rank_00000.bin";
  const std::string pristine = [&] {
    std::ifstream in(data, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  auto write = [&](const std::string& bytes) {
    std::ofstream(data, std::ios::binary | std::ios::trunc) << bytes;
  };
  auto load_error = [&](bool fallback) -> std::string {
    try {
      Trainer t(config("sync", 10, (dir_ / "ckpt").string(),
                       fallback ? "fallback: true" : "fallback: false"));
      return fmt::format("loaded step {}", t.step());
    } catch (const Error& e) {
      return e.what();
    }
  };
  // A flipped bit.
  std::string flipped = pristine;
  flipped[flipped.size() / 2] ^= 0x10;
  write(flipped);
  EXPECT_NE(load_error(false).find("fails its checksum: the file is corrupt"), std::string::npos);
  EXPECT_NE(load_error(false).find("rank_00000.bin: tensor '"), std::string::npos);
  EXPECT_EQ(load_error(true), "loaded step 1");
  // Truncated to half, and to one byte.
  for (size_t keep : {pristine.size() / 2, size_t{1}}) {
    write(pristine.substr(0, keep));
    EXPECT_NE(load_error(false).find("the file is truncated"), std::string::npos) << keep;
    EXPECT_EQ(load_error(true), "loaded step 1");
  }
  // A deleted shard.
  fs::remove(data);
  EXPECT_NE(load_error(false).find("rank_00000.bin (tensor '"), std::string::npos);
  EXPECT_EQ(load_error(true), "loaded step 1");
  write(pristine);
  EXPECT_EQ(load_error(false), "loaded step 2");
  // A flipped bit in the global manifest (its step, its sampler position or any other byte).
  const fs::path manifest = step2 / "manifest.pb";
  const std::string manifest_bytes = [&] {
    std::ifstream in(manifest, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  std::string bad_manifest = manifest_bytes;
  bad_manifest[bad_manifest.size() / 3] ^= 0x01;
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << bad_manifest;
  EXPECT_NE(load_error(false).find("manifest.pb fails its checksum"), std::string::npos);
  EXPECT_EQ(load_error(true), "loaded step 1");
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << manifest_bytes;
  EXPECT_EQ(load_error(false), "loaded step 2");
  // `latest` is a hint: naming nothing, holding garbage or naming an older checkpoint (a crash
  // between the rename and its update), the scan still finds the newest committed one.
  for (const std::string latest : {"step_00000099\n", "\x01\xff garbage", "step_00000001\n"}) {
    std::ofstream(dir_ / "ckpt" / "latest", std::ios::binary | std::ios::trunc) << latest;
    EXPECT_EQ(load_error(false), "loaded step 2") << latest;
  }
  // A checkpoint without its global manifest does not exist: the newest committed one loads.
  fs::rename(manifest, dir_ / "saved_manifest");
  EXPECT_EQ(load_error(false), "loaded step 1");
}

std::vector<std::vector<float>> optimizer_state_of(Trainer& t) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < t.optimizer().params().size(); ++i) {
    for (const auto& [name, s] : t.optimizer().param_state(i)) out.push_back(s.to_vector());
    out.push_back({static_cast<float>(t.optimizer().param_steps(i))});
  }
  out.push_back({static_cast<float>(t.optimizer().steps_taken())});
  return out;
}

// An overlapped checkpoint requested after step 5 with a window of 4 holds the state after
// step 8, bitwise equal to a synchronous snapshot taken after step 8: weights, both moments,
// every step counter (clipping active, so every replayed update uses its clip scale).
TEST_F(CheckpointTest, OverlappedEqualsASynchronousSnapshot) {
  {
    Trainer t(config("overlapped", 20, "", "window: 4"));
    for (int i = 0; i < 5; ++i) t.train_step();
    t.save_checkpoint();
    for (int i = 0; i < 3; ++i) t.train_step();
    t.wait_for_checkpoint();
  }
  ASSERT_EQ(newest().filename(), "step_00000008");
  fs::rename(newest(), dir_ / "overlapped_step8");
  fs::remove_all(dir_ / "ckpt");
  {
    Trainer t(config("sync", 20));
    for (int i = 0; i < 8; ++i) t.train_step();
    t.save_checkpoint();
  }
  Trainer from_overlapped(config("sync", 20, (dir_ / "overlapped_step8").string()));
  Trainer from_sync(config("sync", 20, "latest"));
  EXPECT_EQ(from_overlapped.step(), 8);
  EXPECT_EQ(parameters_of(from_overlapped), parameters_of(from_sync));
  EXPECT_EQ(optimizer_state_of(from_overlapped), optimizer_state_of(from_sync));
}

// A strategy that reports a non-finite gradient norm at step 6, so the Trainer skips that
// update (training.skip_nonfinite_steps) exactly as after a real overflow.
class SkipSixthStep final : public parallel::Strategy {
 public:
  std::string name() const override { return "skip_sixth_step"; }
  optim::ClipResult clip(float max_norm) override {
    optim::ClipResult r = Strategy::clip(max_norm);
    if (++steps_ == 6) r.norm = std::numeric_limits<double>::quiet_NaN();
    return r;
  }

 private:
  int steps_ = 0;
};

// A skipped step inside the window: the overlapped checkpoint opened after step 4 (window 4,
// landing at step 7, step 6 skipped) equals the synchronous snapshot after step 7.
TEST_F(CheckpointTest, OverlappedWindowWithASkippedStepEqualsASynchronousSnapshot) {
  static const bool registered = [] {
    parallel::register_strategy("skip_sixth_step", [](const parallel::StrategyOptions&) {
      return std::make_unique<SkipSixthStep>();
    });
    return true;
  }();
  ASSERT_TRUE(registered);
  auto with_skips = [&](const std::string& mode, const std::string& resume,
                        const std::string& extra) {
    TrainConfig c = config(mode, 20, resume, extra);
    set_field(c, "parallel.strategy", "skip_sixth_step", "test");
    set_field(c, "training.skip_nonfinite_steps", "true", "test");
    return c;
  };
  {
    Trainer t(with_skips("overlapped", "", "window: 4"));
    for (int i = 0; i < 4; ++i) t.train_step();
    t.save_checkpoint();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(t.train_step().skipped, i == 1) << "step " << 5 + i;
    t.wait_for_checkpoint();
  }
  ASSERT_EQ(newest().filename(), "step_00000007");
  fs::rename(newest(), dir_ / "overlapped_step7");
  fs::remove_all(dir_ / "ckpt");
  {
    Trainer t(with_skips("sync", "", ""));
    for (int i = 0; i < 7; ++i) t.train_step();
    t.save_checkpoint();
  }
  Trainer from_overlapped(config("sync", 20, (dir_ / "overlapped_step7").string()));
  Trainer from_sync(config("sync", 20, "latest"));
  EXPECT_EQ(parameters_of(from_overlapped), parameters_of(from_sync));
  EXPECT_EQ(optimizer_state_of(from_overlapped), optimizer_state_of(from_sync));
}

// 40 steps straight vs a window opened at step 17 (landing at 20) and a resumed run.
TEST_F(CheckpointTest, ResumingFromAnOverlappedCheckpointIsBitwiseExact) {
  Trainer straight(config("overlapped", 40, "", "window: 4"));
  std::vector<float> expected;
  for (int i = 0; i < 40; ++i) expected.push_back(straight.train_step().loss);
  {
    Trainer first(config("overlapped", 40, "", "window: 4"));
    for (int i = 0; i < 17; ++i) first.train_step();
    first.save_checkpoint();
    // A request while the window is open is skipped (deterministically, and logged).
    first.train_step();
    first.save_checkpoint();
    for (int i = 0; i < 2; ++i) first.train_step();
    first.wait_for_checkpoint();
  }
  ASSERT_EQ(newest().filename(), "step_00000020");
  Trainer resumed(config("overlapped", 40, "latest", "window: 4"));
  for (int i = 20; i < 40; ++i) EXPECT_EQ(resumed.train_step().loss, expected[i]) << i + 1;
  EXPECT_EQ(parameters_of(resumed), parameters_of(straight));
}

// The manifest says how each checkpoint was taken: a window's as overlapped, the final save
// of an overlapped run (which cannot wait for a window to close) as async.
TEST_F(CheckpointTest, TheManifestSaysHowEachCheckpointWasTaken) {
  Trainer t(config("overlapped", 10, "", "window: 2"));
  for (int i = 0; i < 3; ++i) t.train_step();
  t.save_checkpoint();  // the window lands after step 4
  for (int i = 0; i < 2; ++i) t.train_step();
  t.save_checkpoint(/*now=*/true);
  t.wait_for_checkpoint();
  auto mode_of = [&](const std::string& step_folder) {
    ckpt::proto::Manifest manifest;
    ckpt::read_message(dir_ / "ckpt" / step_folder / "manifest.pb", manifest);
    return manifest.mode();
  };
  EXPECT_EQ(mode_of("step_00000004"), "overlapped");
  EXPECT_EQ(mode_of("step_00000005"), "async");
}

// What a checkpoint copies in memory: the whole state (weights and both moments) for async;
// for a window of 2, the same blocks plus the gradients of its second step for block 0.
TEST_F(CheckpointTest, BytesCopiedCountStateAndRecordedGradients) {
  Trainer t(config("overlapped", 10, "", "window: 2"));
  t.train_step();
  int64_t state = 0;
  for (const auto& shard : t.strategy().owned_state(t.optimizer()).shards)
    state += 3 * static_cast<int64_t>(shard.value.nbytes());
  EXPECT_EQ(t.checkpointer()->bytes_copied(), 0);
  t.save_checkpoint(/*now=*/true);
  EXPECT_EQ(t.checkpointer()->bytes_copied(), state);
  t.wait_for_checkpoint();
  t.save_checkpoint();  // the window opens
  t.train_step();       // records block 0's gradients and closes it
  const int64_t block0_grads = t.checkpointer()->bytes_copied() - state;
  EXPECT_GT(block0_grads, 0);
  EXPECT_LT(block0_grads, state / 3);  // a part of one gradient's worth
  // copy_sizes (what prepare() warms up) lists exactly these copies.
  const std::vector<int64_t> sizes =
      ckpt::OverlappedWindow::copy_sizes(t.strategy().owned_state(t.optimizer()).shards, 2);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}),
            t.checkpointer()->bytes_copied());
  t.wait_for_checkpoint();
}

// The window's replay directly: a skipped step and a parameter without a gradient inside the
// window leave exactly what the live optimizer did.
TEST(OverlappedWindow, ReplayMatchesTheLiveOptimizerWithSkipsAndMissingGradients) {
  std::vector<optim::ParamEntry> entries;
  for (int i = 0; i < 5; ++i) {
    Tensor p = testing::randn({7 + i, 3}, 40 + i);
    p.set_requires_grad(true);
    entries.push_back({fmt::format("p{}", i), p, i % 2 ? 0.1f : 0.0f});
  }
  // One parameter large enough that the live update runs on several threads and the replay
  // works through several cache tiles and a partial last one (53,357 elements); the largest
  // goes into block 0, which misses every update.
  Tensor big = testing::randn({229, 233}, 50);
  big.set_requires_grad(true);
  entries.push_back({"big", big, 0.1f});
  optim::AdamW live(entries, {0.9f, 0.95f, 1e-8f});
  auto set_grads = [&](int step) {
    for (size_t i = 0; i < entries.size(); ++i) {
      // Parameter 3 gets no gradient in step 2 (an unused branch of the model).
      entries[i].param.set_grad(i == 3 && step == 2
                                    ? Tensor()
                                    : testing::randn(entries[i].param.shape(), 100 * step + i));
    }
  };
  for (int step = 0; step < 2; ++step) {
    set_grads(step);
    live.step(1e-2f, 0.5f);
  }
  ckpt::OverlappedWindow window(live.options(), optim::whole_parameters(live).shards, 4);
  for (int step = 2; step < 5; ++step) {
    set_grads(step);
    const bool skipped = step == 3;
    const float lr = 1e-2f * static_cast<float>(step), scale = 0.25f * static_cast<float>(step);
    window.before_update(optim::whole_parameters(live).shards, lr, scale, skipped);
    if (!skipped) live.step(lr, scale);
    EXPECT_EQ(window.after_update(optim::whole_parameters(live).shards), step == 4);
  }
  window.finish();
  ASSERT_TRUE(window.complete());
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& c = window.copies()[i];
    EXPECT_EQ(c.value.to_vector(), entries[i].param.to_vector()) << i;
    EXPECT_EQ(c.exp_avg.to_vector(), live.exp_avg(i).to_vector()) << i;
    EXPECT_EQ(c.exp_avg_sq.to_vector(), live.exp_avg_sq(i).to_vector()) << i;
    EXPECT_EQ(c.steps, live.param_steps(i)) << i;
  }
}

TEST_F(CheckpointTest, ConfigErrors) {
  const TrainConfig bad = parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 1 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
training {{ steps: 2 }}
checkpoint {{ every_steps: 5 mode: "lazy" }}
resume: "latest"
)",
                                                   dir_.string()),
                                       "test");
  const std::string message = [&] {
    try {
      validate(bad);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("valid");
  }();
  EXPECT_NE(message.find("checkpoint.mode = \"lazy\""), std::string::npos) << message;
  EXPECT_NE(message.find("test:5: checkpoint.every_steps = 5 needs checkpoint.dir"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("needs checkpoint.dir (where to look for the latest checkpoint)"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace braid::train
