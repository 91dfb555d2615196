// The ranks agree on the checkpoint they load: a slice that only rank 1 reads is corrupted in the
// newest checkpoint (a ZeRO-1 optimizer chunk, the second pipeline stage, a tensor-parallel
// shard), and every rank then loads the previous one and trains exactly like a run resumed from
// it; without fallback, or when no checkpoint verifies, every rank stops with the same line
// naming the rank, the file and the tensor.
#include <unistd.h>

#include <fstream>
#include <functional>

#include "braid/ckpt/checkpoint.h"
#include "braid/train/trainer.h"
#include "ckpt/format.h"  // the manifest (private to libbraid)
#include "dist_test.h"
#include "training_equivalence.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

struct Layout {
  const char* name;
  int tp, pp, dp;
  const char* strategy;
};

class CheckpointAgreement : public DistTest {
 protected:
  void SetUp() override {
    data_ = write_corpus("braid_cka_", rank());
    Tensor pid = Tensor::full({1}, static_cast<float>(::getpid()));
    world().broadcast(pid, 0)->wait();
    ckpt_ = fs::temp_directory_path() /
            fmt::format("braid_cka_shared_{}", static_cast<int64_t>(pid.item()));
  }
  void TearDown() override {
    world().barrier()->wait();
    fs::remove_all(data_);
    if (rank() == 0) fs::remove_all(ckpt_);
    DistTest::TearDown();
  }

  train::TrainConfig config(const Layout& l, const std::string& resume, bool fallback) const {
    return train::parse_config(
        fmt::format(R"(
model {{ vocab_size: 257 padded_vocab_multiple: 1 n_layer: 2 n_head: 2 n_embd: 32
        block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 3e-3 grad_clip: 1.0 warmup_steps: 1 }}
training {{ steps: 20 batch_size: {} seq_len: 16 val_every: 0 seed: 5 }}
parallel {{ tp: {} pp: {} dp: {} micro_batches: {} strategy: "{}" }}
checkpoint {{ dir: "{}" mode: "sync" keep: 0 fallback: {} }}
resume: "{}"
)",
                    data_.string(), 4 / l.dp, l.tp, l.pp, l.dp, l.pp > 1 ? 2 : 0, l.strategy,
                    ckpt_.string(), fallback ? "true" : "false", resume),
        "test");
  }

  fs::path data_, ckpt_;
};

std::vector<float> losses(train::Trainer& t, int steps) {
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.train_step().loss);
  return out;
}

// A slice of rank 1's data file that rank 0 does not read when loading under the saving layout:
// an optimizer moment (ZeRO-1 and the pipeline: only rank 1 holds it), 1-D and split evenly
// (tensor parallelism: rank 0's half of the range is disjoint).
const ckpt::proto::TensorSlice& rank1_only_slice(const ckpt::proto::Manifest& m) {
  for (const auto& s : m.tensors())
    if (s.file() == "rank_00001.bin" && s.name().ends_with("/exp_avg_sq") &&
        s.global_shape_size() == 1 && s.block_shape_size() <= 1)
      return s;
  BRAID_FAIL("no 1-D optimizer slice in rank_00001.bin");
}

// Flips one bit in the middle of `slice` in `folder`'s data file.
void damage(const fs::path& folder, const ckpt::proto::TensorSlice& slice) {
  std::fstream f(folder / slice.file(), std::ios::in | std::ios::out | std::ios::binary);
  const int64_t at = slice.byte_offset() + slice.byte_length() / 2;
  f.seekg(at);
  char byte = 0;
  f.read(&byte, 1);
  byte ^= 0x04;
  f.seekp(at);
  f.write(&byte, 1);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(CheckpointAgreement, ARankThatCannotLoadTakesEveryRankToThePreviousCheckpoint) {
  if (size() != 2) GTEST_SKIP() << "run on 2 ranks";
  const Layout layouts[] = {
      {"zero1 dp2", 1, 1, 2, "zero1"}, {"pp2", 1, 2, 1, "auto"}, {"tp2", 2, 1, 1, "auto"}};
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    if (rank() == 0) fs::remove_all(ckpt_);
    world().barrier()->wait();
    {
      train::Trainer t(config(l, "", true), world_ptr());
      for (int i = 0; i < 2; ++i) {
        losses(t, 2);
        t.save_checkpoint();  // steps 2 and 4
      }
    }
    const fs::path step2 = ckpt_ / "step_00000002", step4 = ckpt_ / "step_00000004";
    ckpt::proto::Manifest manifest;
    ckpt::read_message(step4 / ckpt::kManifestFile, manifest);
    const ckpt::proto::TensorSlice& slice = rank1_only_slice(manifest);
    if (rank() == 0) damage(step4, slice);
    world().barrier()->wait();

    // Read alone (no agreement), rank 0 would load step 4 and rank 1 could not: the damage is
    // in what rank 1 reads only.
    {
      train::Trainer probe(config(l, "", true), world_ptr());
      const optim::OwnedState live = probe.strategy().owned_state(probe.optimizer());
      ckpt::Layout layout = {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}};
      const std::string alone = error_of([&] {
        ckpt::load_checkpoint(step4.string(), probe.model(), probe.optimizer(), layout, {}, &live);
      });
      if (rank() == 0) EXPECT_EQ(alone, "no error");
      if (rank() == 1) EXPECT_NE(alone.find(slice.name()), std::string::npos) << alone;
    }

    // Together, every rank resumes at step 2, and trains like a run resumed from step 2.
    std::vector<float> expected;
    {
      train::Trainer from2(config(l, step2.string(), true), world_ptr());
      expected = losses(from2, 3);
    }
    train::Trainer resumed(config(l, "latest", true), world_ptr());
    Tensor steps = Tensor::full({2}, 0.0f);
    steps.data<float>()[rank()] = static_cast<float>(resumed.step());
    world().all_reduce(steps, ReduceOp::sum)->wait();
    EXPECT_EQ(steps.to_vector(), (std::vector<float>{2.0f, 2.0f}));
    EXPECT_EQ(losses(resumed, 3), expected);

    // Without fallback every rank stops, naming rank 1, its file and the tensor.
    const std::string strict =
        error_of([&] { train::Trainer t(config(l, "latest", false), world_ptr()); });
    EXPECT_NE(strict.find("step_00000004 cannot be loaded: rank 1: "), std::string::npos) << strict;
    EXPECT_NE(strict.find("rank_00001.bin: tensor '" + slice.name() + "'"), std::string::npos)
        << strict;
  }
}

TEST_F(CheckpointAgreement, WhenNoCheckpointLoadsEveryRankNamesWhatFailedInEach) {
  if (size() != 2) GTEST_SKIP() << "run on 2 ranks";
  const Layout l = {"zero1 dp2", 1, 1, 2, "zero1"};
  if (rank() == 0) fs::remove_all(ckpt_);
  world().barrier()->wait();
  {
    train::Trainer t(config(l, "", true), world_ptr());
    for (int i = 0; i < 2; ++i) {
      losses(t, 2);
      t.save_checkpoint();
    }
  }
  for (const char* step : {"step_00000002", "step_00000004"}) {
    ckpt::proto::Manifest manifest;
    ckpt::read_message(ckpt_ / step / ckpt::kManifestFile, manifest);
    if (rank() == 0) damage(ckpt_ / step, rank1_only_slice(manifest));
  }
  world().barrier()->wait();
  const std::string error =
      error_of([&] { train::Trainer t(config(l, "latest", true), world_ptr()); });
  EXPECT_NE(error.find("loads on every rank: step_00000004: rank 1: "), std::string::npos) << error;
  EXPECT_NE(error.find(" | step_00000002: rank 1: "), std::string::npos) << error;
  EXPECT_NE(error.find("fails its checksum"), std::string::npos) << error;
}

}  // namespace
}  // namespace braid::dist::testing
