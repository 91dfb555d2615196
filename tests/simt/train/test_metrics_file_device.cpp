// training.run_dir on the emulated device: the metrics reach the host one logging interval
// late, and metrics.jsonl still has every recorded step once, in step order, with the values
// the device reported and the device's memory peak.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device_training_fixture.h"

namespace braid::train::device_training {
namespace {

TEST_F(DeviceTrainingTest, MetricsFileGetsTheLateDeviceMetricsInStepOrder) {
  TrainConfig config = this->config("cuda", 6, false, /*log_every=*/2);
  config.proto.mutable_training()->set_val_every(3);
  config.proto.mutable_training()->set_run_dir((dir_ / "run").string());
  Trainer t(config);
  t.fit();
  ASSERT_EQ(t.history().size(), 6u);
  std::map<int64_t, float> val_at(t.val_history().begin(), t.val_history().end());

  std::ifstream in(dir_ / "run" / "metrics.jsonl");
  std::vector<int64_t> steps;
  for (std::string text; std::getline(in, text);) {
    const nlohmann::json line = nlohmann::json::parse(text);
    const int64_t step = line["step"].get<int64_t>();
    steps.push_back(step);
    const StepMetrics& h = t.history()[step - 1];
    SCOPED_TRACE(step);
    ASSERT_TRUE(line["loss"].is_number_float()) << line;
    EXPECT_EQ(line["loss"].get<double>(), static_cast<double>(h.loss));
    EXPECT_EQ(line["grad_norm"].get<double>(), h.grad_norm);
    EXPECT_EQ(line["skipped"].get<bool>(), h.skipped);
    ASSERT_TRUE(line["device_peak_bytes"].is_number_integer()) << line;
    EXPECT_EQ(line["device_peak_bytes"].get<int64_t>(), h.device_peak_bytes);
    EXPECT_GT(h.device_peak_bytes, 0);
    if (val_at.count(step)) {
      ASSERT_TRUE(line["val_loss"].is_number_float()) << line;
      EXPECT_EQ(line["val_loss"].get<double>(), static_cast<double>(val_at[step]));
    } else {
      EXPECT_TRUE(line["val_loss"].is_null()) << line;
    }
  }
  // Logged: 2, 4 and 6 (the last); validated: 3 and 6.
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 3, 4, 6}));
}

}  // namespace
}  // namespace braid::train::device_training
