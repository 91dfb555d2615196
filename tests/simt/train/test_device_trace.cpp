// training.trace_steps on the emulated device: the trace holds every block's forward and
// backward (host spans: the time to issue them), the update, and the device's own track with
// every kernel as the device ran it; the phase split is measured, and a traced run trains
// bitwise like an untraced one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "device_training_fixture.h"

namespace braid::train::device_training {
namespace {

TEST_F(DeviceTrainingTest, TracedDeviceStepsHoldEveryBlockAndTrainLikeUntracedOnes) {
  TrainConfig traced_config = config("cuda", 3);
  traced_config.proto.mutable_training()->set_trace_steps("2:3");
  traced_config.proto.mutable_training()->set_run_dir((dir_ / "run").string());
  // One after the other: the recorder is process-wide, so steps of a second Trainer running
  // meanwhile would be in the trace too.
  Trainer plain(config("cuda", 3));
  for (int i = 0; i < 3; ++i) plain.train_step();
  Trainer traced(traced_config);
  for (int i = 0; i < 3; ++i) {
    const StepMetrics m = traced.train_step();
    EXPECT_GT(m.forward_ms, 0) << "step " << i + 1;
    EXPECT_GT(m.backward_ms, 0) << "step " << i + 1;
    EXPECT_GT(m.optimizer_ms, 0) << "step " << i + 1;
  }
  traced.sync_device_metrics();
  plain.sync_device_metrics();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(traced.history()[i].loss, plain.history()[i].loss) << "step " << i + 1;

  std::ifstream in(dir_ / "run" / "trace.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json events = nlohmann::json::parse(in).at("traceEvents");
  int device_track = -1;
  for (const auto& e : events)
    if (e.at("ph") == "M" && e.at("name") == "thread_name" &&
        e.at("args").at("name") == "cuda:0 compute")
      device_track = e.at("tid").get<int>();
  ASSERT_GE(device_track, 0) << "no track of cuda:0's compute stream";
  std::multiset<std::string> names, kernels;
  double device_end = 0;
  for (const auto& e : events)
    if (e.at("ph") == "X") {
      const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
      EXPECT_GE(dur, 0.0);
      if (e.at("tid").get<int>() != device_track) {
        names.insert(e.at("name").get<std::string>());
        continue;
      }
      kernels.insert(e.at("name").get<std::string>());
      // The stream runs one kernel at a time: the spans follow each other.
      EXPECT_GE(ts + 1e-3, device_end) << e.at("name");
      device_end = ts + dur;
    }
  EXPECT_EQ(names.count("step 1"), 0u);
  EXPECT_EQ(names.count("step 2"), 1u);
  EXPECT_EQ(names.count("step 3"), 1u);
  EXPECT_EQ(names.count("optimizer step"), 2u);
  // Two traced steps of grad_accum_steps passes each.
  const auto passes = static_cast<size_t>(2 * traced_config.training().grad_accum_steps());
  const int64_t layers = traced.model().config().n_layer;
  for (int64_t b = 0; b < layers; ++b) {
    EXPECT_EQ(names.count(fmt::format("forward block {}", b)), passes) << b;
    EXPECT_EQ(names.count(fmt::format("backward block {}", b)), passes) << b;
  }
  // Without recompute, one attention forward and backward per block and pass; one fused AdamW
  // launch per traced step at least.
  EXPECT_EQ(kernels.count("attention_forward"), passes * static_cast<size_t>(layers));
  EXPECT_EQ(kernels.count("attention_backward"), passes * static_cast<size_t>(layers));
  EXPECT_GE(kernels.count("gemm"), passes * static_cast<size_t>(layers) * 4);
  EXPECT_GE(kernels.count("adamw_group_device"), 2u);
}

}  // namespace
}  // namespace braid::train::device_training
