// training.trace_steps on one process: the trace holds exactly the traced steps, every block's
// forward and backward inside each, the optimizer step, and well-nested spans; the phase split
// of every step is positive and fits in the step; bad trace settings are clear config errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/train/step_trace.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

struct Span {
  std::string name, category;
  int pid = 0, tid = 0;
  double ts = 0, dur = 0;
  nlohmann::json args;
  double end() const { return ts + dur; }
};

// The complete ("X") events of a trace file.
std::vector<Span> spans_of(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Span> spans;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    spans.push_back({e.at("name"), e.value("cat", ""), e.at("pid"), e.at("tid"), e.at("ts"),
                     e.at("dur"), e.value("args", nlohmann::json::object())});
  }
  return spans;
}

// Spans of one track either nest or follow each other (what a Chrome "thread" requires).
void expect_well_nested(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.pid, a.tid, a.ts, b.dur) < std::tie(b.pid, b.tid, b.ts, a.dur);
  });
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    EXPECT_GE(s.dur, 0.0) << s.name;
    while (!open.empty() &&
           (open.back()->pid != s.pid || open.back()->tid != s.tid || open.back()->end() <= s.ts))
      open.pop_back();
    if (!open.empty())
      EXPECT_LE(s.end(), open.back()->end() + 1e-3)
          << s.name << " overlaps " << open.back()->name << " without nesting in it";
    open.push_back(&s);
  }
}

bool inside(const Span& s, const Span& outer) {
  return s.pid == outer.pid && s.ts >= outer.ts && s.end() <= outer.end() + 1e-3;
}

class StepTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("braid_step_trace_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string config_text(const std::string& training, const std::string& extra = "") const {
    return fmt::format(R"(
model {{ vocab_size: 257 n_layer: 3 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 grad_clip: 1.0 }}
training {{ steps: 4 batch_size: 2 seq_len: 16 val_every: 0 threads: 1 {} }}
{}
)",
                       dir_.string(), training, extra);
  }

  fs::path dir_;
};

TEST_F(StepTraceTest, TracesStepsTwoAndThreeWithEveryBlock) {
  const fs::path run = dir_ / "run";
  Trainer trainer(parse_config(
      config_text(fmt::format(R"(trace_steps: "2:3" run_dir: "{}")", run.string())), "test"));
  for (int i = 0; i < 4; ++i) {
    trainer.train_step();
    // Written at the end of step 3, not before.
    EXPECT_EQ(fs::exists(run / "trace.json"), i >= 2) << "after step " << i + 1;
  }
  ASSERT_TRUE(fs::exists(run / "trace_rank_0.json"));
  const std::vector<Span> spans = spans_of(run / "trace.json");
  expect_well_nested(spans);

  std::vector<Span> steps;
  for (const Span& s : spans)
    if (s.category == "step") steps.push_back(s);
  ASSERT_EQ(steps.size(), 2u);
  std::set<std::string> step_names{steps[0].name, steps[1].name};
  EXPECT_EQ(step_names, (std::set<std::string>{"step 2", "step 3"}));
  for (const Span& step : steps) {
    std::multiset<std::string> seen;
    for (const Span& s : spans)
      if (inside(s, step)) seen.insert(s.name);
    for (int b = 0; b < 3; ++b) {
      EXPECT_EQ(seen.count(fmt::format("forward block {}", b)), 1u) << step.name << " block " << b;
      EXPECT_EQ(seen.count(fmt::format("backward block {}", b)), 1u) << step.name << " block " << b;
    }
    EXPECT_EQ(seen.count("optimizer step"), 1u) << step.name;
    EXPECT_EQ(seen.count("clip"), 1u) << step.name;
    EXPECT_EQ(seen.count("embedding"), 1u) << step.name;
    EXPECT_EQ(seen.count("head"), 1u) << step.name;
  }
  // Every span lies inside a traced step (the trace starts and stops with them).
  for (const Span& s : spans)
    EXPECT_TRUE(inside(s, steps[0]) || inside(s, steps[1])) << s.name << " at " << s.ts;
  // Backward of a block runs after its forward, last block first.
  for (const Span& step : steps) {
    auto find = [&](const std::string& name) {
      for (const Span& s : spans)
        if (s.name == name && inside(s, step)) return s;
      ADD_FAILURE() << name << " missing in " << step.name;
      return Span{};
    };
    const Span f2 = find("forward block 2"), b2 = find("backward block 2"),
               b0 = find("backward block 0");
    EXPECT_GE(b2.ts, f2.end());
    EXPECT_GE(b0.ts, b2.end());
  }
}

// Tracing only observes: the backward markers pass gradients through unchanged, so a traced run
// trains bitwise like an untraced one.
TEST_F(StepTraceTest, TracedStepsTrainBitwiseLikeUntracedOnes) {
  Trainer plain(parse_config(config_text(""), "plain"));
  for (int i = 0; i < 3; ++i) plain.train_step();
  Trainer traced(parse_config(
      config_text(fmt::format(R"(trace_steps: "1:3" run_dir: "{}")", (dir_ / "run").string())),
      "traced"));
  for (int i = 0; i < 3; ++i) {
    const StepMetrics b = traced.train_step();
    const StepMetrics& a = plain.history()[i];
    EXPECT_EQ(a.loss, b.loss) << "step " << i + 1;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << i + 1;
  }
  ASSERT_TRUE(fs::exists(dir_ / "run" / "trace.json"));
  const auto p = plain.model().named_parameters(), q = traced.model().named_parameters();
  ASSERT_EQ(p.size(), q.size());
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_EQ(p[i].second.to_vector(), q[i].second.to_vector()) << p[i].first;
}

// The phase split of a CPU step: each measured phase is positive, and they never overlap, so
// their sum fits in the step (+ the clock reads between them).
TEST_F(StepTraceTest, PhaseSplitIsPositiveAndFitsInTheStep) {
  Trainer trainer(parse_config(
      config_text("", fmt::format(R"(checkpoint {{ dir: "{}" mode: "overlapped" window: 3 }})",
                                  (dir_ / "ckpt").string())),
      "test"));
  trainer.train_step();
  trainer.save_checkpoint();  // opens the window: the next two steps copy and record updates
  for (int i = 0; i < 3; ++i) {
    const StepMetrics m = trainer.train_step();
    EXPECT_GT(m.forward_ms, 0) << "step " << m.step;
    EXPECT_GT(m.backward_ms, 0) << "step " << m.step;
    EXPECT_GT(m.optimizer_ms, 0) << "step " << m.step;
    EXPECT_GE(m.comm_wait_ms, 0) << "step " << m.step;
    if (i < 2)
      EXPECT_GT(m.checkpoint_stall_ms, 0) << "step " << m.step << " is in the window";
    else
      EXPECT_EQ(m.checkpoint_stall_ms, 0) << "step " << m.step << " is after the window";
    const double sum =
        m.forward_ms + m.backward_ms + m.comm_wait_ms + m.optimizer_ms + m.checkpoint_stall_ms;
    EXPECT_LE(sum, m.step_ms + 0.05) << "step " << m.step;
  }
  trainer.wait_for_checkpoint();
}

TEST_F(StepTraceTest, BadTraceSettingsAreClearErrors) {
  auto error_of = [&](const std::string& training, const std::string& extra = "") {
    try {
      validate(parse_config(config_text(training, extra), "test"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const char* bad : {"3:2", "0:1", "2", "a:b", "2:3:4", ":3"}) {
    const std::string msg = error_of(fmt::format(R"(trace_steps: "{}" run_dir: "x")", bad));
    EXPECT_NE(msg.find("training.trace_steps"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("1 <= A <= B"), std::string::npos) << bad << ": " << msg;
  }
  const std::string no_dir = error_of(R"(trace_steps: "1:2")");
  EXPECT_NE(no_dir.find("training.run_dir"), std::string::npos) << no_dir;
  const std::string late = error_of(R"(trace_steps: "2:9" run_dir: "x")");
  EXPECT_NE(late.find("training.steps"), std::string::npos) << late;
  const std::string old = error_of("", R"(parallel { pipeline_trace: "t.json" })");
  EXPECT_NE(old.find("parallel.pipeline_trace"), std::string::npos) << old;
  EXPECT_NE(old.find("training.trace_steps"), std::string::npos) << old;
  EXPECT_EQ(error_of(R"(trace_steps: "1:4" run_dir: "x")"), "");
  EXPECT_EQ(parse_trace_steps("2:3")->first, 2);
  EXPECT_EQ(parse_trace_steps("2:3")->last, 3);
  EXPECT_FALSE(parse_trace_steps("").has_value());
}

}  // namespace
}  // namespace braid::train
