// The memory plan of sharded layouts against what each rank measures: the tiny example's shape
// (vocab 50257, 4 x 256, batch 4 x 128) trained two steps under tp, sp, pp, DDP and ZeRO-1 over
// 2 ranks and two of their products over 4, and GPT-2 124M's (batch 1 x 64) under tp and ZeRO-1;
// every rank's host allocator peak of the second step within 10% of its own line of the plan.
// (The one-process shapes are tests/unit/train's.)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "braid/train/memory_plan.h"
#include "braid/train/trainer.h"
#include "dist_test.h"
#include "training_equivalence.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTiny =
    "model { vocab_size: 50257 n_layer: 4 n_head: 4 n_embd: 256 block_size: 128 }\n"
    "training { batch_size: 4 seq_len: 128 ";
constexpr const char* kGpt2 =
    "model { vocab_size: 50257 n_layer: 12 n_head: 12 n_embd: 768 block_size: 1024 }\n"
    "training { batch_size: 1 seq_len: 64 ";

struct Layout {
  const char* name;
  int world;          // the ranks the layout needs
  const char* shape;  // kTiny or kGpt2: the model and the start of the training block
  const char* parallel;
};

class MemoryPlanLayouts : public DistTest, public ::testing::WithParamInterface<Layout> {
 protected:
  void SetUp() override { dir_ = write_corpus("braid_memory_layouts_", rank()); }
  void TearDown() override {
    fs::remove_all(dir_);
    DistTest::TearDown();
  }
  fs::path dir_;
};

TEST_P(MemoryPlanLayouts, EveryRanksPeakIsItsPlanWithinTenPercent) {
  const Layout& layout = GetParam();
  if (size() != layout.world) GTEST_SKIP() << layout.name << " needs " << layout.world << " ranks";
  // peak_flops given: the MFU denominator is not measured (it would cost seconds).
  const train::TrainConfig config =
      train::parse_config(fmt::format(R"(
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-4 }}
{} steps: 2 log_every: 100 val_every: 0 peak_flops: 1e12 }}
parallel {{ {} }}
)",
                                      dir_.string(), layout.shape, layout.parallel),
                          layout.name);
  const train::MemoryPlan plan = train::plan_memory(config);
  const train::RankMemory& mine = plan.for_rank(rank());
  train::Trainer trainer(config, world_ptr());
  trainer.train_step();
  const train::StepMetrics second = trainer.train_step();
  const double measured = static_cast<double>(second.peak_bytes);
  const double planned = static_cast<double>(mine.total);
  std::printf("%s rank %d: plan %.0f bytes, measured peak %.0f: %+.2f%%\n", layout.name, rank(),
              planned, measured, 100.0 * (planned - measured) / measured);
  EXPECT_LE(std::abs(planned - measured), 0.10 * measured)
      << layout.name << " rank " << rank() << ": plan " << planned << " bytes, measured "
      << measured;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MemoryPlanLayouts,
    ::testing::Values(Layout{"tp2", 2, kTiny, "tp: 2"},
                      Layout{"tp2_sp", 2, kTiny, "tp: 2 sequence_parallel: true"},
                      Layout{"pp2", 2, kTiny, "pp: 2 micro_batches: 2"},
                      Layout{"dp2_ddp", 2, kTiny, R"(dp: 2 strategy: "ddp")"},
                      Layout{"dp2_zero1", 2, kTiny, R"(dp: 2 strategy: "zero1")"},
                      Layout{"gpt2_tp2", 2, kGpt2, "tp: 2"},
                      Layout{"gpt2_dp2_zero1", 2, kGpt2, R"(dp: 2 strategy: "zero1")"},
                      Layout{"tp2_dp2_zero1", 4, kTiny, R"(tp: 2 dp: 2 strategy: "zero1")"},
                      Layout{"tp2_pp2", 4, kTiny, "tp: 2 pp: 2 micro_batches: 2"}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace braid::dist::testing
