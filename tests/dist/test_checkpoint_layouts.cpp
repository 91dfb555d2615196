// Checkpoints across parallel layouts: resuming under the saving layout continues bitwise
// exactly; a checkpoint saved under (tp, pp, dp) loads under other layouts (and into one
// process) with every weight and both Adam moments equal to the bit, slice by slice, and
// training continues like the saving layout (loss rel. diff <= 1e-5 over 10 steps). Covers
// tied embeddings across pipeline stages, vocabulary padding, fused qkv split by heads and an
// uneven pipeline split.
#include <unistd.h>

#include "braid/ckpt/checkpoint.h"
#include "braid/train/trainer.h"
#include "dist_test.h"
#include "training_equivalence.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

struct Layout {
  int tp = 1, pp = 1, dp = 1;
  std::string stage_layers;  // "3,2,2,1"
  std::string strategy = "auto";
  int world() const { return tp * pp * dp; }
  std::string str() const {
    return fmt::format("(tp, pp, dp) = ({}, {}, {}) {}{}", tp, pp, dp, strategy,
                       stage_layers.empty() ? "" : " split " + stage_layers);
  }
};

class CheckpointLayouts : public DistTest {
 protected:
  void SetUp() override {
    data_ = write_corpus("braid_ckl_", rank());
    // One folder every rank agrees on: named after rank 0's process.
    Tensor pid = Tensor::full({1}, static_cast<float>(::getpid()));
    world().broadcast(pid, 0)->wait();
    ckpt_ = fs::temp_directory_path() /
            fmt::format("braid_ckl_shared_{}_{}", static_cast<int64_t>(pid.item()),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    world().barrier()->wait();
    fs::remove_all(data_);
    if (rank() == 0) fs::remove_all(ckpt_);
    DistTest::TearDown();
  }

  // 8 blocks of width 32 with 4 heads, batch 4 per step, AdamW with clipping. The
  // vocabulary pads to a multiple of tp only (257, 258 or 260 rows), so layouts differ in
  // padding too.
  // `mode` "overlapped" uses a window of 3 steps; `dir` defaults to the test's folder.
  train::TrainConfig config(const Layout& l, const std::string& resume = "",
                            const std::string& mode = "async", fs::path dir = {}) const {
    std::string split;
    for (char c : l.stage_layers)
      if (std::isdigit(c)) split += fmt::format(" stage_layers: {}", c - '0');
    return train::parse_config(
        fmt::format(R"(
model {{ vocab_size: 257 padded_vocab_multiple: 1 n_layer: 8 n_head: 4 n_embd: 32
        block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 3e-3 weight_decay: 0.1 grad_clip: 1.0 warmup_steps: 2 }}
training {{ steps: 40 batch_size: {} seq_len: 16 val_every: 0 seed: 9 }}
parallel {{ tp: {} pp: {} dp: {} micro_batches: {} strategy: "{}" {} }}
checkpoint {{ dir: "{}" mode: "{}" window: 3 }}
resume: "{}"
)",
                    data_.string(), 4 / l.dp, l.tp, l.pp, l.dp, l.pp > 1 ? 4 / l.dp : 0, l.strategy,
                    // Small buckets: ZeRO-1 chunks then cut several parameters mid-way.
                    split + (l.strategy == "zero1"
                                 ? R"( strategy_options { key: "bucket_mb" value: "0.05" })"
                                 : ""),
                    dir.empty() ? ckpt_.string() : dir.string(), mode, resume),
        "test");
  }

  // Where a one-process Trainer that every rank runs at once keeps its own checkpoints: each is
  // a run of its own, and one checkpoint folder takes one run at a time (its run lock). Such
  // runs load the shared checkpoints through a resume path instead.
  fs::path solo_dir() const { return ckpt_ / fmt::format("solo_rank_{}", rank()); }

  // The world for a layout: all ranks, a prefix of them (null for the others), or none.
  ProcessGroupPtr world_for(const Layout& l) {
    if (l.world() == 1) return nullptr;
    if (l.world() == size()) return world_ptr();
    std::vector<int> members(l.world());
    for (int r = 0; r < l.world(); ++r) members[r] = r;
    return world().split(members, "prefix");
  }

  fs::path data_, ckpt_;
};

std::vector<float> losses(train::Trainer& t, int steps) {
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.train_step().loss);
  return out;
}

// In async mode the checkpoint is the state at the save; in overlapped mode (window 3) the
// state two steps later, after the window's replay.
TEST_F(CheckpointLayouts, ResumingUnderTheSavingLayoutIsBitwiseExact) {
  std::vector<Layout> layouts;
  if (size() == 2) layouts = {{1, 2, 1}, {1, 1, 2}, {2, 1, 1}, {1, 1, 2, "", "zero1"}};
  if (size() == 4) layouts = {{2, 2, 1}, {1, 2, 2}, {2, 1, 2, "", "zero1"}, {1, 2, 2, "", "zero1"}};
  if (layouts.empty()) GTEST_SKIP() << "run on 2 and 4 ranks";
  for (const std::string mode : {"async", "overlapped"}) {
    const int landing = mode == "async" ? 6 : 8;
    for (const Layout& l : layouts) {
      if (rank() == 0) fs::remove_all(ckpt_);
      world().barrier()->wait();
      train::Trainer straight(config(l, "", mode), world_ptr());
      const std::vector<float> expected = losses(straight, 12);
      {
        train::Trainer first(config(l, "", mode), world_ptr());
        losses(first, 6);
        first.save_checkpoint();
        losses(first, landing - 6);
        first.wait_for_checkpoint();
      }
      train::Trainer resumed(config(l, "latest", mode), world_ptr());
      ASSERT_EQ(resumed.step(), landing) << mode << " " << l.str();
      const std::vector<float> rest = losses(resumed, 12 - landing);
      for (int i = 0; i < 12 - landing; ++i)
        EXPECT_EQ(rest[i], expected[landing + i])
            << mode << " " << l.str() << " step " << landing + i + 1;
      for (const auto& [name, p] : resumed.model().named_parameters())
        EXPECT_EQ(p.to_vector(), straight.model().state_dict().at(name).to_vector())
            << mode << " " << l.str() << " " << name;
    }
  }
}

// Under ZeRO-1 every data-parallel rank writes its own chunks of the weights and moments
// (nothing is gathered), and an overlapped checkpoint, replayed on those chunks, equals a
// synchronous snapshot of the same step to the bit.
TEST_F(CheckpointLayouts, ZeroOneRanksWriteTheirChunksAndOverlappedEqualsSync) {
  Layout l;
  if (size() == 2) l = {1, 1, 2, "", "zero1"};
  if (size() == 4) l = {2, 1, 2, "", "zero1"};
  if (l.world() == 1) GTEST_SKIP() << "run on 2 and 4 ranks";
  const fs::path overlapped_dir = ckpt_ / "overlapped", sync_dir = ckpt_ / "sync";
  {
    train::Trainer t(config(l, "", "overlapped", overlapped_dir), world_ptr());
    losses(t, 6);
    t.save_checkpoint();  // the window lands after step 8
    losses(t, 2);
    t.wait_for_checkpoint();
  }
  {
    train::Trainer t(config(l, "", "sync", sync_dir), world_ptr());
    losses(t, 8);
    t.save_checkpoint();
  }
  {
    // Resuming under ZeRO-1 keeps only this rank's chunks of the moments.
    train::Trainer resumed(config(l, sync_dir.string()), world_ptr());
    ASSERT_EQ(resumed.step(), 8);
    const auto& adamw = dynamic_cast<const optim::AdamW&>(resumed.optimizer());
    for (size_t i = 0; i < adamw.params().size(); ++i)
      EXPECT_FALSE(adamw.exp_avg(i).defined() || adamw.exp_avg_sq(i).defined())
          << "whole moments of " << adamw.params()[i].name << " still held after the load";
  }
  world().barrier()->wait();
  if (rank() != 0) return;
  for (const fs::path& dir : {overlapped_dir, sync_dir}) {
    int manifests = 0;
    for (const auto& f : fs::directory_iterator(dir / "step_00000008"))
      manifests += f.path().extension() == ".manifest";
    EXPECT_EQ(manifests, size()) << dir << ": every rank owns a part under ZeRO-1";
  }
  train::Trainer from_overlapped(config({}, overlapped_dir.string(), "async", solo_dir()), nullptr);
  train::Trainer from_sync(config({}, sync_dir.string(), "async", solo_dir()), nullptr);
  ASSERT_EQ(from_overlapped.step(), 8);
  for (const auto& [name, p] : from_sync.model().named_parameters())
    EXPECT_EQ(from_overlapped.model().state_dict().at(name).to_vector(), p.to_vector()) << name;
  optim::Optimizer& a = from_overlapped.optimizer();
  optim::Optimizer& b = from_sync.optimizer();
  EXPECT_EQ(a.steps_taken(), b.steps_taken());
  for (size_t i = 0; i < b.params().size(); ++i) {
    const auto sa = a.param_state(i), sb = b.param_state(i);
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t k = 0; k < sb.size(); ++k)
      EXPECT_EQ(sa[k].second.to_vector(), sb[k].second.to_vector())
          << sb[k].first << " of " << b.params()[i].name;
    EXPECT_EQ(a.param_steps(i), b.param_steps(i)) << b.params()[i].name;
  }
}

// Saved under one layout, loaded under others: weights and moments bitwise equal to the
// single-process load of the same checkpoint, slice by slice; training continues like the
// saving layout.
TEST_F(CheckpointLayouts, ReshardingLoadsEveryLayoutExactly) {
  Layout saved;
  std::vector<Layout> targets;
  if (size() == 2) {
    // ZeRO-1 shards cut the moments at bucket chunks, across parameter boundaries.
    saved = {1, 1, 2, "", "zero1"};
    targets = {{1, 1, 1}, {2, 1, 1}, {1, 1, 2}};
  } else if (size() == 4) {
    saved = {2, 2, 1};
    targets = {{4, 1, 1}, {1, 4, 1, "3,2,2,1"}, {1, 2, 2, "", "zero1"}, {2, 1, 2}, {1, 1, 1}};
  } else if (size() == 8) {
    saved = {2, 2, 2};
    targets = {{4, 1, 2}, {1, 4, 2}, {1, 1, 1}, {2, 2, 1}};
  } else {
    GTEST_SKIP() << "run on 2, 4 and 8 ranks";
  }
  std::vector<float> continued;
  {
    train::Trainer original(config(saved), world_ptr());
    losses(original, 5);
    original.save_checkpoint();
    original.wait_for_checkpoint();
    continued = losses(original, 10);
  }
  // The reference: the checkpoint loaded into one process.
  train::Trainer whole(config({}, ckpt_.string(), "async", solo_dir()), nullptr);
  const auto whole_params = whole.model().state_dict();
  std::map<std::string, std::vector<std::pair<std::string, Tensor>>> whole_state;
  for (size_t i = 0; i < whole.optimizer().params().size(); ++i)
    whole_state[whole.optimizer().params()[i].name] = whole.optimizer().param_state(i);

  for (const Layout& target : targets) {
    ProcessGroupPtr group = world_for(target);
    if (target.world() > 1 && !group) continue;  // not a member of this layout's ranks
    train::Trainer loaded(target.world() == 1 ? config(target, ckpt_.string(), "async", solo_dir())
                                              : config(target, "latest"),
                          group);
    // ZeRO-1 keeps the live moments in its shards: gather them to compare.
    loaded.strategy().gather_optimizer_state(loaded.optimizer());
    const auto specs = loaded.model().shard_specs();
    for (const auto& [name, p] : loaded.model().named_parameters())
      EXPECT_EQ(p.to_vector(),
                slice_of_reference(whole_params.at(name), specs.at(name)).to_vector())
          << target.str() << " weight " << name;
    for (size_t i = 0; i < loaded.optimizer().params().size(); ++i) {
      const std::string& name = loaded.optimizer().params()[i].name;
      const auto mine = loaded.optimizer().param_state(i);
      const auto& reference = whole_state.at(name);
      ASSERT_EQ(mine.size(), reference.size());
      for (size_t k = 0; k < mine.size(); ++k)
        EXPECT_EQ(mine[k].second.to_vector(),
                  slice_of_reference(reference[k].second, specs.at(name)).to_vector())
            << target.str() << " " << mine[k].first << " of " << name;
      EXPECT_EQ(loaded.optimizer().param_steps(i), whole.optimizer().param_steps(i));
    }
    const std::vector<float> after = losses(loaded, 10);
    for (int i = 0; i < 10; ++i)
      EXPECT_LE(std::fabs(after[i] - continued[i]), 1e-5 * std::fabs(continued[i]))
          << target.str() << " step " << 6 + i;
  }
}

TEST_F(CheckpointLayouts, LoadingAnotherLayoutWithoutReshardingIsAnError) {
  if (size() != 2) GTEST_SKIP() << "run on 2 ranks";
  {
    train::Trainer t(config({1, 2, 1}), world_ptr());
    t.train_step();
    t.save_checkpoint();
    t.wait_for_checkpoint();
  }
  train::TrainConfig c = config({2, 1, 1}, "latest");
  train::set_field(c, "checkpoint.reshard", "false", "test");
  try {
    train::Trainer t(c, world_ptr());
    FAIL() << "a (tp, pp) = (1, 2) checkpoint must not load into tp = 2 without resharding";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "was saved under tp=1 cp=1 pp=2 dp=1, this run is tp=2 cp=1 pp=1 dp=1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace braid::dist::testing
