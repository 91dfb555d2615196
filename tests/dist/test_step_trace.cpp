// training.trace_steps across ranks: the merged trace holds one named process per rank, each
// with its data-parallel bucket all_reduces (bytes equal to the buckets the strategy forms) in
// every traced step, and a pipeline's actions and transfers; communication waits are measured.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "braid/parallel/data_parallel.h"
#include "braid/train/trainer.h"
#include "dist_test.h"
#include "training_equivalence.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kBucketMb = 0.02;

std::string config_text(const fs::path& data, const fs::path& run, const std::string& parallel) {
  return fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 grad_clip: 1.0 }}
training {{ steps: 4 batch_size: 4 seq_len: 16 val_every: 0 seed: 5 trace_steps: "2:3"
            run_dir: "{}" }}
parallel {{ {} }}
)",
                     data.string(), run.string(), parallel);
}

class StepTraceDist : public DistTest {
 protected:
  void SetUp() override {
    data_ = write_corpus("braid_trace_data_", rank());
    // One folder for all ranks (they share this machine), fresh for every test.
    run_ = fs::temp_directory_path() /
           fmt::format("braid_dist_trace_{}_{}", size(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    if (rank() == 0) fs::remove_all(run_);
    world().barrier()->wait();
  }
  void TearDown() override {
    world().barrier()->wait();
    if (rank() == 0) fs::remove_all(run_);
    fs::remove_all(data_);
    DistTest::TearDown();
  }
  // The merged trace's events (read on rank 0).
  nlohmann::json merged() const {
    std::ifstream in(run_ / "trace.json");
    EXPECT_TRUE(in.good()) << run_ / "trace.json";
    return nlohmann::json::parse(in).at("traceEvents");
  }
  fs::path data_, run_;
};

// The bucket sizes DataParallel forms: parameters in reverse registration order, a new bucket
// once the current one holds bucket_mb of f32 gradients (data_parallel.cpp).
std::multiset<int64_t> bucket_bytes(const optim::Optimizer& optimizer) {
  const auto limit = static_cast<int64_t>(kBucketMb * (1 << 20) / sizeof(float));
  std::vector<int64_t> buckets;
  const auto& params = optimizer.params();
  for (size_t k = params.size(); k-- > 0;) {
    if (buckets.empty() || buckets.back() >= limit) buckets.push_back(0);
    buckets.back() += params[k].param.numel();
  }
  std::multiset<int64_t> bytes;
  for (int64_t b : buckets) bytes.insert(b * static_cast<int64_t>(sizeof(float)));
  return bytes;
}

TEST_F(StepTraceDist, MergedTraceHoldsEveryRankAndItsBucketAllReduces) {
  if (size() < 2) GTEST_SKIP() << "a merged trace of one rank is the unit test's";
  train::Trainer trainer(
      train::parse_config(
          config_text(data_, run_,
                      fmt::format(R"(dp: {} strategy: "ddp" strategy_options {{ key: "bucket_mb"
                                     value: "{}" }})",
                                  size(), kBucketMb)),
          "test"),
      world_ptr());
  for (int i = 0; i < 4; ++i) {
    const train::StepMetrics m = trainer.train_step();
    // Every step waits for its buckets' all_reduce.
    EXPECT_GT(m.comm_wait_ms, 0) << "step " << m.step + 1;
    EXPECT_GT(m.forward_ms, 0) << "step " << m.step + 1;
    EXPECT_GT(m.backward_ms, 0) << "step " << m.step + 1;
  }
  EXPECT_TRUE(fs::exists(run_ / fmt::format("trace_rank_{}.json", rank())));
  const auto& dp = dynamic_cast<parallel::DataParallel&>(trainer.strategy());
  const std::multiset<int64_t> expected = bucket_bytes(trainer.optimizer());
  ASSERT_EQ(expected.size(), dp.num_buckets());
  ASSERT_GT(expected.size(), 1u) << "bucket_mb " << kBucketMb << " should make several buckets";
  if (rank() != 0) return;

  const nlohmann::json events = merged();
  std::map<int, std::string> processes;
  std::map<int, std::vector<std::pair<double, double>>> steps;  // pid -> traced steps' spans
  for (const auto& e : events) {
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      processes[e.at("pid")] = e.at("args").at("name");
    if (e.at("ph") == "X" && e.value("cat", "") == "step")
      steps[e.at("pid")].emplace_back(e.at("ts"),
                                      e.at("ts").get<double>() + e.at("dur").get<double>());
  }
  ASSERT_EQ(static_cast<int>(processes.size()), size());
  for (int r = 0; r < size(); ++r) {
    ASSERT_TRUE(processes.count(r)) << "rank " << r << " is missing from the merged trace";
    EXPECT_NE(processes[r].find(fmt::format("rank {}", r)), std::string::npos) << processes[r];
    EXPECT_NE(processes[r].find("dp="), std::string::npos) << processes[r];
    ASSERT_EQ(steps[r].size(), 2u) << "rank " << r << " traced steps 2 and 3";
    for (const auto& [begin, end] : steps[r]) {
      std::multiset<int64_t> reduced;
      for (const auto& e : events) {
        if (e.at("ph") != "X" || e.at("pid") != r || e.value("cat", "") != "collective") continue;
        const double ts = e.at("ts");
        const auto& args = e.at("args");
        EXPECT_GE(e.at("dur").get<double>(), 0.0);
        // The bucket reductions; the step's scalars (loss, gradient norm) are 4 bytes.
        if (ts < begin || ts > end || args.at("op") != "all_reduce" || args.at("group") != "dp" ||
            args.at("bytes") == 4)
          continue;
        reduced.insert(args.at("bytes").get<int64_t>());
      }
      EXPECT_EQ(reduced, expected) << "rank " << r << ", step at " << begin;
    }
  }
}

TEST_F(StepTraceDist, PipelineActionsAndTransfersAreTraced) {
  if (size() != 2) GTEST_SKIP() << "a 2-stage pipeline needs 2 ranks";
  train::Trainer trainer(
      train::parse_config(config_text(data_, run_, R"(pp: 2 micro_batches: 2 schedule: "1f1b")"),
                          "test"),
      world_ptr());
  for (int i = 0; i < 4; ++i) {
    const train::StepMetrics m = trainer.train_step();
    EXPECT_GT(m.forward_ms, 0);
    EXPECT_GT(m.backward_ms, 0);
  }
  if (rank() != 0) return;
  const nlohmann::json events = merged();
  for (int stage = 0; stage < 2; ++stage) {
    std::multiset<std::string> actions;
    int transfers = 0;
    for (const auto& e : events) {
      if (e.at("pid") != stage) continue;
      if (e.at("ph") == "X" && e.value("cat", "") == "pipeline") {
        actions.insert(e.at("name").get<std::string>());
        EXPECT_EQ(e.at("args").at("stage"), stage);
      }
      if (e.at("ph") == "b" && e.value("cat", "") == "p2p") {
        ++transfers;
        EXPECT_EQ(e.at("args").at("group"), "pp");
        EXPECT_EQ(e.at("args").at("bytes"), 2 * 16 * 32 * 4) << "one micro-batch's activation";
      }
    }
    // Two traced steps of 2 micro-batches, each forward and backward once per step.
    for (const char* a : {"F0.0", "F1.0", "B0.0", "B1.0"})
      EXPECT_EQ(actions.count(a), 2u) << "stage " << stage << " " << a;
    const char* send = stage == 0 ? "send-act0.0" : "send-grad0.0";
    EXPECT_EQ(actions.count(send), 2u) << "stage " << stage;
    // Each stage sends 2 and receives 2 per step.
    EXPECT_EQ(transfers, 8) << "stage " << stage;
  }
}

}  // namespace
}  // namespace braid::dist::testing
