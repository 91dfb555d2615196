// The run's metrics in training.run_dir: a short Trainer run's metrics.jsonl and TensorBoard
// event file checked value by value against the Trainer's history, and the resume trim.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/train/trainer.h"
#include "train/metrics_file.h"
#include "train/tensorboard_reader.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> read_jsonl(const fs::path& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      files.push_back(e.path());
  return files;
}

// Tag -> value of one summary event.
std::map<std::string, float> values_of(const tensorboard::proto::Event& e) {
  std::map<std::string, float> v;
  for (const auto& value : e.summary().value()) v[value.tag()] = value.simple_value();
  return v;
}

class MetricsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_metrics_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    run_dir_ = dir_ / "run";
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig config(int steps, int val_every, int log_every) const {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
    data::write_token_shard(dir_ / "val_000.bin",
                            std::span<const int32_t>(tokens.data(), tokens.size() / 4));
    return parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 1 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{0}/train_*.bin" val_pattern: "{0}/val_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 }}
training {{ steps: {1} batch_size: 2 seq_len: 16 val_every: {2} val_steps: 2 log_every: {3}
           seed: 3 run_dir: "{4}" }}
)",
                                    dir_.string(), steps, val_every, log_every, run_dir_.string()),
                        "metrics_test");
  }

  fs::path dir_, run_dir_;
};

// Every field of a line with its type; the numbers that may be non-finite (written null) are
// finite in this run.
void expect_schema(const json& line) {
  ASSERT_TRUE(line.is_object()) << line;
  for (const char* f :
       {"loss", "lr", "grad_norm", "tokens_per_s", "mfu", "step_ms", "forward_ms", "backward_ms",
        "comm_wait_ms", "optimizer_ms", "checkpoint_stall_ms", "wall_time"}) {
    ASSERT_TRUE(line.contains(f)) << f << " missing in " << line;
    EXPECT_TRUE(line[f].is_number_float()) << f << " in " << line;
  }
  ASSERT_TRUE(line.contains("step") && line["step"].is_number_integer()) << line;
  ASSERT_TRUE(line.contains("host_peak_bytes") && line["host_peak_bytes"].is_number_integer())
      << line;
  ASSERT_TRUE(line.contains("val_loss")) << line;
  EXPECT_TRUE(line["val_loss"].is_null() || line["val_loss"].is_number_float()) << line;
  ASSERT_TRUE(line.contains("device_peak_bytes")) << line;
  EXPECT_TRUE(line["device_peak_bytes"].is_null()) << "a CPU run has no device peak: " << line;
  ASSERT_TRUE(line.contains("skipped") && line["skipped"].is_boolean()) << line;
  EXPECT_EQ(line.size(), 17u) << "fields not in docs/metrics.md: " << line;
}

TEST_F(MetricsFileTest, ATrainerRunsMetricsMatchItsHistory) {
  Trainer trainer(config(/*steps=*/4, /*val_every=*/2, /*log_every=*/1));
  trainer.fit();
  const auto& history = trainer.history();
  ASSERT_EQ(history.size(), 4u);
  // Validations before training, after step 2 and at the end.
  const auto& vals = trainer.val_history();
  ASSERT_EQ(vals.size(), 3u);
  std::map<int64_t, float> val_at(vals.begin(), vals.end());
  ASSERT_EQ(val_at.count(0) + val_at.count(2) + val_at.count(4), 3u);

  const std::vector<json> lines = read_jsonl(run_dir_ / "metrics.jsonl");
  ASSERT_EQ(lines.size(), history.size());
  double last_wall = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(i);
    const json& l = lines[i];
    const StepMetrics& h = history[i];
    expect_schema(l);
    EXPECT_EQ(l["step"].get<int64_t>(), h.step + 1);
    // JSON numbers are the history's values exactly (floats widened to double).
    EXPECT_EQ(l["loss"].get<double>(), static_cast<double>(h.loss));
    EXPECT_EQ(l["lr"].get<double>(), static_cast<double>(h.lr));
    EXPECT_EQ(l["grad_norm"].get<double>(), h.grad_norm);
    EXPECT_EQ(l["tokens_per_s"].get<double>(), h.tokens_per_s);
    EXPECT_EQ(l["mfu"].get<double>(), h.mfu);
    EXPECT_EQ(l["step_ms"].get<double>(), h.step_ms);
    EXPECT_EQ(l["forward_ms"].get<double>(), h.forward_ms);
    EXPECT_EQ(l["backward_ms"].get<double>(), h.backward_ms);
    EXPECT_EQ(l["comm_wait_ms"].get<double>(), h.comm_wait_ms);
    EXPECT_EQ(l["optimizer_ms"].get<double>(), h.optimizer_ms);
    EXPECT_EQ(l["checkpoint_stall_ms"].get<double>(), h.checkpoint_stall_ms);
    EXPECT_EQ(l["host_peak_bytes"].get<int64_t>(), h.peak_bytes);
    EXPECT_EQ(l["skipped"].get<bool>(), h.skipped);
    const int64_t step = h.step + 1;
    if (val_at.count(step)) {
      ASSERT_TRUE(l["val_loss"].is_number_float());
      EXPECT_EQ(l["val_loss"].get<double>(), static_cast<double>(val_at[step]));
    } else {
      EXPECT_TRUE(l["val_loss"].is_null());
    }
    EXPECT_GE(l["wall_time"].get<double>(), last_wall);
    last_wall = l["wall_time"].get<double>();
  }

  // One event file; the reader checks both CRCs of every record.
  const std::vector<fs::path> files = event_files(run_dir_);
  ASSERT_EQ(files.size(), 1u);
  const auto events = read_tensorboard_events(files[0].string());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  size_t train_events = 0, val_events = 0;
  for (size_t e = 1; e < events.size(); ++e) {
    const auto& ev = events[e];
    ASSERT_TRUE(ev.has_summary()) << e;
    const auto v = values_of(ev);
    if (v.count("val/loss")) {
      ASSERT_EQ(v.size(), 1u);
      ASSERT_TRUE(val_at.count(ev.step())) << ev.step();
      EXPECT_EQ(v.at("val/loss"), val_at[ev.step()]);
      ++val_events;
      continue;
    }
    ASSERT_GE(ev.step(), 1);
    ASSERT_LE(ev.step(), 4);
    const StepMetrics& h = history[ev.step() - 1];
    EXPECT_EQ(ev.step(), static_cast<int64_t>(train_events) + 1) << "in step order";
    ++train_events;
    const std::map<std::string, float> want = {
        {"train/loss", h.loss},
        {"train/lr", h.lr},
        {"train/grad_norm", static_cast<float>(h.grad_norm)},
        {"train/tokens_per_s", static_cast<float>(h.tokens_per_s)},
        {"train/mfu", static_cast<float>(h.mfu)},
        {"train/skipped", 0.0f},
        {"time/step_ms", static_cast<float>(h.step_ms)},
        {"time/forward_ms", static_cast<float>(h.forward_ms)},
        {"time/backward_ms", static_cast<float>(h.backward_ms)},
        {"time/comm_wait_ms", static_cast<float>(h.comm_wait_ms)},
        {"time/optimizer_ms", static_cast<float>(h.optimizer_ms)},
        {"time/checkpoint_stall_ms", static_cast<float>(h.checkpoint_stall_ms)},
        {"memory/host_peak_mib",
         static_cast<float>(static_cast<double>(h.peak_bytes) / (1 << 20))}};
    EXPECT_EQ(v, want) << "step " << ev.step();
  }
  EXPECT_EQ(train_events, 4u);
  EXPECT_EQ(val_events, 3u);
}

// Only the logged steps (every log_every, the last) and the validated ones get a line.
TEST_F(MetricsFileTest, LinesAreTheLoggedAndValidatedSteps) {
  Trainer trainer(config(/*steps=*/5, /*val_every=*/2, /*log_every=*/3));
  trainer.fit();
  std::vector<int64_t> steps, with_val;
  for (const json& l : read_jsonl(run_dir_ / "metrics.jsonl")) {
    steps.push_back(l["step"].get<int64_t>());
    if (!l["val_loss"].is_null()) with_val.push_back(l["step"].get<int64_t>());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(with_val, (std::vector<int64_t>{2, 4, 5}));
}

StepMetrics step_metrics(int64_t done) {
  StepMetrics m;
  m.step = done - 1;
  m.loss = 10.0f - static_cast<float>(done);
  m.lr = 1e-3f;
  m.grad_norm = 0.5;
  return m;
}

// A run resumed from step 4 drops what the first run wrote past it (and a line a crash cut),
// then appends: every step once, in order.
TEST_F(MetricsFileTest, AResumedRunDropsTheStepsItRedoes) {
  const auto val_due = [](int64_t s) { return s % 3 == 0; };
  {
    MetricsFile first(run_dir_.string(), 0, val_due);
    first.add_val(0, 9.5f);
    for (int64_t s = 1; s <= 6; ++s) {
      first.add_step(step_metrics(s));
      if (s % 3 == 0) first.add_val(s, 20.0f + static_cast<float>(s));
    }
  }
  {
    // A crash in the middle of writing a line.
    std::ofstream(run_dir_ / "metrics.jsonl", std::ios::app) << "{\"step\": 7, \"lo";
  }
  ASSERT_EQ(event_files(run_dir_).size(), 1u);
  const fs::path first_events = event_files(run_dir_)[0];
  // The second run gets a file of its own (named by the second it starts).
  fs::rename(first_events, run_dir_ / "events.out.tfevents.1.first");
  {
    MetricsFile second(run_dir_.string(), 4, val_due);
    for (int64_t s = 5; s <= 6; ++s) {
      second.add_step(step_metrics(s));
      if (s % 3 == 0) second.add_val(s, 30.0f + static_cast<float>(s));
    }
  }
  std::vector<int64_t> steps;
  std::vector<json> lines = read_jsonl(run_dir_ / "metrics.jsonl");
  for (const json& l : lines) steps.push_back(l["step"].get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(lines[2]["val_loss"].get<double>(), 23.0);  // the first run's
  EXPECT_EQ(lines[5]["val_loss"].get<double>(), 36.0);  // the second run's

  // The first run's events keep steps 0..4 only; the second's hold 5 and 6.
  const auto old_events =
      read_tensorboard_events((run_dir_ / "events.out.tfevents.1.first").string());
  std::vector<int64_t> old_steps;
  for (const auto& e : old_events)
    if (e.has_summary()) old_steps.push_back(e.step());
  EXPECT_EQ(old_steps, (std::vector<int64_t>{0, 1, 2, 3, 3, 4}));
  std::vector<int64_t> new_steps;
  for (const fs::path& f : event_files(run_dir_)) {
    if (f.filename() == "events.out.tfevents.1.first") continue;
    for (const auto& e : read_tensorboard_events(f.string()))
      if (e.has_summary()) new_steps.push_back(e.step());
  }
  EXPECT_EQ(new_steps, (std::vector<int64_t>{5, 6, 6}));

  // Resumed at the last step, fit() only validates again: nothing new is recorded.
  const std::string before = read_jsonl(run_dir_ / "metrics.jsonl").back().dump();
  {
    MetricsFile last(run_dir_.string(), 6, val_due);
    last.add_val(6, 36.0f);
  }
  EXPECT_EQ(read_jsonl(run_dir_ / "metrics.jsonl").size(), 6u);
  EXPECT_EQ(read_jsonl(run_dir_ / "metrics.jsonl").back().dump(), before);
  size_t val_events_at_6 = 0;
  for (const fs::path& f : event_files(run_dir_))
    for (const auto& e : read_tensorboard_events(f.string()))
      val_events_at_6 += e.step() == 6 && values_of(e).count("val/loss");
  EXPECT_EQ(val_events_at_6, 1u);

  // Starting over from step 0 leaves no line and no event file of the old runs.
  { MetricsFile fresh(run_dir_.string(), 0, val_due); }
  EXPECT_TRUE(read_jsonl(run_dir_ / "metrics.jsonl").empty());
  EXPECT_EQ(event_files(run_dir_).size(), 1u);  // the fresh run's own, version event only
}

// On a device the validation loss comes before its step's metrics; on the host after them; a
// step whose validation never came (a stopped run) is written at close without one.
TEST_F(MetricsFileTest, ValidationLossLandsOnItsStepInEitherOrder) {
  {
    MetricsFile f(run_dir_.string(), 0, [](int64_t s) { return s % 2 == 0; });
    f.add_val(2, 7.0f);  // device order: the validation first
    f.add_step(step_metrics(2));
    f.add_step(step_metrics(4));  // host order: the step waits
    f.add_val(4, 6.0f);
    f.add_step(step_metrics(6));  // waits for a validation that never comes
  }
  const std::vector<json> lines = read_jsonl(run_dir_ / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["val_loss"].get<double>(), 7.0);
  EXPECT_EQ(lines[1]["val_loss"].get<double>(), 6.0);
  EXPECT_EQ(lines[2]["step"].get<int64_t>(), 6);
  EXPECT_TRUE(lines[2]["val_loss"].is_null());
}

TEST_F(MetricsFileTest, AMidFileLineThatIsNotJsonIsAnError) {
  fs::create_directories(run_dir_);
  std::ofstream(run_dir_ / "metrics.jsonl") << "{\"step\": 1}\nnot json\n{\"step\": 2}\n";
  try {
    MetricsFile f(run_dir_.string(), 2, {});
    ADD_FAILURE() << "a corrupt metrics.jsonl was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2 is not a metrics line"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace braid::train
