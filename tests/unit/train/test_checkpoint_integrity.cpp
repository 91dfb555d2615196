// Checkpoint integrity in one process: a bit flipped anywhere in any file of a checkpoint fails
// the load; uncommitted leftovers are swept at start and committed checkpoints kept; the run
// lock is shared within a process and names its holder; a stop signal checkpoints the step and
// a resumed run continues as if uninterrupted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>

#include "braid/ckpt/checkpoint.h"
#include "braid/ckpt/run_lock.h"
#include "braid/data/token_shard.h"
#include "braid/train/stop_signals.h"
#include "braid/train/trainer.h"
#include "checkpoint_fixture.h"
#include "ckpt/format.h"  // the manifest (private to libbraid)

namespace braid::train {
namespace {

namespace fs = std::filesystem;

class CheckpointIntegrity : public CheckpointFolderTest {
 protected:
  TrainConfig config(int steps, const std::string& extra = "") const {
    return parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 }}
training {{ steps: {} batch_size: 4 seq_len: 16 val_every: 0 log_every: 100 seed: 3 }}
checkpoint {{ dir: "{}" mode: "sync" keep: 0 fallback: false {} }}
resume: "latest"
)",
                                    dir_.string(), steps, ckpt().string(), extra),
                        "test");
  }
  fs::path ckpt() const { return dir_ / "ckpt"; }

  // Trains a step and saves it: the checkpoint's folder and its manifest.
  std::pair<fs::path, ckpt::proto::Manifest> save_one(Trainer& t) const {
    t.train_step();
    t.save_checkpoint();
    std::pair<fs::path, ckpt::proto::Manifest> out;
    out.first = ckpt::resolve_checkpoint(ckpt().string());
    ckpt::read_message(out.first / ckpt::kManifestFile, out.second);
    return out;
  }
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Byte positions to damage in a file of `size` bytes: both ends, the middle and a seeded sample,
// plus those of `extra` inside the file (the padding of a data file).
std::vector<size_t> positions(size_t size, std::vector<size_t> extra, uint32_t seed) {
  std::vector<size_t> out = {0, size / 2, size - 1};
  std::mt19937 gen(seed);
  for (int i = 0; i < 24; ++i) out.push_back(gen() % size);
  for (size_t p : extra)
    if (p < size) out.push_back(p);
  return out;
}

// Every file of the checkpoint, every sampled byte, one bit each: the load fails naming the file,
// and the pristine checkpoint loads again afterwards.
TEST_F(CheckpointIntegrity, EveryFlippedBitFailsTheLoad) {
  Trainer t(config(10));
  const auto [folder, manifest] = save_one(t);
  // The zero padding between the data file's slices (and so covered by no CRC of a slice).
  std::vector<size_t> padding;
  for (const auto& slice : manifest.tensors()) {
    const int64_t end = slice.byte_offset() + slice.byte_length();
    if (ckpt::round_up_to_block(end) > end) padding.push_back(static_cast<size_t>(end));
  }
  ASSERT_GE(padding.size(), 3u) << "the test needs slices that do not end on a block boundary";
  const optim::OwnedState live = t.strategy().owned_state(t.optimizer());
  auto load = [&]() -> std::string {
    try {
      ckpt::load_checkpoint(ckpt().string(), t.model(), t.optimizer(), t.grid(), {false, false},
                            &live);
      return "loaded";
    } catch (const Error& e) {
      return e.what();
    }
  };
  int flips = 0;
  uint32_t seed = 1;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const fs::path file = entry.path();
    const std::string pristine = read_file(file);
    ASSERT_FALSE(pristine.empty()) << file;
    const bool data = file.extension() == ".bin";
    for (size_t pos : positions(pristine.size(), data ? padding : std::vector<size_t>{}, seed++)) {
      std::string damaged = pristine;
      damaged[pos] = static_cast<char>(damaged[pos] ^ (1 << (pos % 8)));
      write_file(file, damaged);
      const std::string error = load();
      EXPECT_NE(error.find(file.filename().string()), std::string::npos)
          << "a flipped bit at byte " << pos << " of " << file << " gave: " << error;
      ++flips;
    }
    write_file(file, pristine);
  }
  EXPECT_GE(flips, 3 * 27);
  EXPECT_EQ(load(), "loaded");
}

// Bytes appended to a data file, or a slice moved off its block boundary, are layout problems
// (braid-ckpt verify reports them): nothing in a data file is outside a slice or its padding.
TEST_F(CheckpointIntegrity, ADataFileHoldsNothingButItsSlices) {
  Trainer t(config(10));
  const auto [folder, manifest] = save_one(t);
  std::vector<const ckpt::proto::TensorSlice*> slices;
  for (const auto& slice : manifest.tensors()) slices.push_back(&slice);
  const fs::path file = folder / "rank_00000.bin";
  EXPECT_TRUE(ckpt::data_file_problems(file, slices).empty());
  std::ofstream(file, std::ios::binary | std::ios::app) << 'x';
  const std::vector<std::string> appended = ckpt::data_file_problems(file, slices);
  ASSERT_EQ(appended.size(), 1u);
  EXPECT_NE(appended[0].find("but its last slice ends at byte"), std::string::npos) << appended[0];
  ckpt::proto::TensorSlice moved = *slices[1];
  moved.set_byte_offset(moved.byte_offset() + 8);
  slices[1] = &moved;
  std::vector<std::string> shifted = ckpt::data_file_problems(file, slices);
  ASSERT_FALSE(shifted.empty());
  EXPECT_NE(shifted[0].find("starts at byte"), std::string::npos) << shifted[0];
}

// What a crash leaves (a folder being written, one whose deletion was cut short, latest.tmp) is
// swept when the next run starts; committed checkpoints and files of the user's stay.
TEST_F(CheckpointIntegrity, UncommittedLeftoversAreSweptAtStart) {
  {
    Trainer t(config(10));
    t.train_step();
    t.save_checkpoint();
    t.train_step();
    t.save_checkpoint();
  }
  fs::create_directories(ckpt() / "step_00000003.tmp");
  write_file(ckpt() / "step_00000003.tmp" / "rank_00000.bin", "partial");
  fs::copy(ckpt() / "step_00000001", ckpt() / "step_00000004", fs::copy_options::recursive);
  fs::remove(ckpt() / "step_00000004" / ckpt::kManifestFile);  // uncommitted, then cut short
  write_file(ckpt() / "latest.tmp", "step_0000");
  write_file(ckpt() / "notes.txt", "mine");
  Trainer again(config(10));
  EXPECT_EQ(again.step(), 2);
  std::vector<std::string> names;
  for (const auto& p : fs::directory_iterator(ckpt())) names.push_back(p.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "lock", "notes.txt", "step_00000001",
                                             "step_00000002"}));
}

TEST_F(CheckpointIntegrity, TheRunLockIsSharedWithinAProcessAndNamesItsHolder) {
  const auto first = ckpt::RunLock::acquire(ckpt().string());
  const auto second = ckpt::RunLock::acquire((ckpt() / "." / "").string());
  EXPECT_EQ(first.get(), second.get());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(ckpt::RunLock::holder(ckpt().string()),
            fmt::format("pid {} on host {}", ::getpid(), host));
  // A Trainer of this process on the folder shares it too.
  Trainer t(config(3));
  t.fit();
}

// A SIGTERM while a step runs: the step finishes, a checkpoint of it is committed, and a run
// resumed from it gives the losses of an uninterrupted run, to the bit.
TEST_F(CheckpointIntegrity, SigtermCheckpointsTheStepAndTheResumeMatchesAnUninterruptedRun) {
  std::vector<float> straight;
  {
    TrainConfig c = config(8);
    c.proto.mutable_checkpoint()->set_dir((dir_ / "other").string());
    Trainer t(std::move(c));
    t.fit();
    for (const StepMetrics& m : t.history()) straight.push_back(m.loss);
  }
  std::vector<float> interrupted;
  {
    Trainer t(config(8));
    int batches = 0;
    const std::function<data::Batch()> sampler = t.batch_source();
    t.set_batch_source([&] {
      if (++batches == 3) std::raise(SIGTERM);  // inside step 3
      return sampler();
    });
    t.fit();
    EXPECT_EQ(t.stopped_by(), SIGTERM);
    EXPECT_EQ(t.step(), 3);
    for (const StepMetrics& m : t.history()) interrupted.push_back(m.loss);
  }
  EXPECT_EQ(ckpt::resolve_checkpoint(ckpt().string()), (ckpt() / "step_00000003").string());
  Trainer resumed(config(8));
  EXPECT_EQ(resumed.step(), 3);
  resumed.fit();
  EXPECT_EQ(resumed.stopped_by(), 0);
  for (const StepMetrics& m : resumed.history()) interrupted.push_back(m.loss);
  EXPECT_EQ(interrupted, straight);
}

TEST(StopSignals, AFirstSignalIsRecordedAndTheHandlersAreRestored) {
  struct sigaction before = {};
  sigaction(SIGUSR1, nullptr, &before);
  {
    const StopSignals signals;
    EXPECT_EQ(StopSignals::received(), 0);
    std::raise(SIGUSR1);
    EXPECT_EQ(StopSignals::received(), SIGUSR1);
  }
  struct sigaction after = {};
  sigaction(SIGUSR1, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  const StopSignals again;
  EXPECT_EQ(StopSignals::received(), 0);
}

TEST(StopSignalsDeathTest, ASecondSignalEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const StopSignals signals;
        std::raise(SIGTERM);
        if (StopSignals::received() != SIGTERM) std::_Exit(3);
        std::raise(SIGTERM);
        std::_Exit(4);  // not reached: the second SIGTERM takes the default action
      },
      ::testing::KilledBySignal(SIGTERM), "stop requested");
}

}  // namespace
}  // namespace braid::train
