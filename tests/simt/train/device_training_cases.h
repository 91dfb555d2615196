// Training on a CUDA device against training on the CPU, shared by the emulated-device binary
// (tests/simt/train) and the real-GPU one (tests/gpu/test_device_training.cpp).
#pragma once

#include "device_training_fixture.h"

namespace braid::train::device_training {

// Ten steps on the device track ten on the CPU: the same initial weights bit for bit, every
// step's loss within 1e-5 relative, the gradient norm within 1e-4 relative, and final weights
// within 2e-4 absolute (AdamW steps of lr 1e-2 normalise each gradient element, so the fp32
// reassociation of the device's reductions moves an element by a small fraction of lr).
TEST_F(DeviceTrainingTest, TenStepsMatchTheCpu) {
  Trainer cpu(config("cpu", 10));
  Trainer gpu(config("cuda", 10));
  ASSERT_EQ(gpu.device(), Device::cuda(0));
  const auto cpu_params = cpu.model().named_parameters();
  const auto gpu_params = gpu.model().named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    ASSERT_EQ(gpu_params[i].second.device(), Device::cuda(0)) << gpu_params[i].first;
    ASSERT_EQ(host_values(gpu_params[i].second), cpu_params[i].second.to_vector())
        << gpu_params[i].first << " starts from other weights";
  }
  for (int i = 0; i < 10; ++i) {
    cpu.train_step();
    gpu.train_step();
  }
  gpu.sync_device_metrics();
  ASSERT_EQ(gpu.history().size(), 10u);
  for (int i = 0; i < 10; ++i) {
    const StepMetrics& c = cpu.history()[i];
    const StepMetrics& g = gpu.history()[i];
    EXPECT_LE(std::abs(g.loss - c.loss), 1e-5 * std::abs(c.loss)) << "step " << i + 1;
    EXPECT_LE(std::abs(g.grad_norm - c.grad_norm), 1e-4 * c.grad_norm) << "step " << i + 1;
    EXPECT_FALSE(g.skipped);
    EXPECT_TRUE(g.on_device);
  }
  EXPECT_EQ(gpu.optimizer().steps_taken(), 10);
  const auto& adamw = dynamic_cast<const optim::AdamW&>(gpu.optimizer());
  double worst = 0;
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    ASSERT_EQ(gpu_params[i].second.grad().device(), Device::cuda(0)) << gpu_params[i].first;
    ASSERT_EQ(adamw.exp_avg(i).device(), Device::cuda(0)) << gpu_params[i].first;
    ASSERT_EQ(adamw.exp_avg_sq(i).device(), Device::cuda(0)) << gpu_params[i].first;
    const double d =
        max_abs_diff(host_values(gpu_params[i].second), cpu_params[i].second.to_vector());
    EXPECT_LE(d, 2e-4) << gpu_params[i].first;
    worst = std::max(worst, d);
  }
  std::printf("largest weight difference after 10 steps: %.3g\n", worst);
  // Validation on the device.
  EXPECT_NEAR(gpu.evaluate(), cpu.evaluate(), 1e-5 * std::abs(cpu.evaluate()));
}

// SGD has no device-scaled kernel: it reads the step's record back and updates per parameter.
// Three steps track the CPU's as AdamW's do.
TEST_F(DeviceTrainingTest, SgdTrainsAsOnTheCpu) {
  auto sgd = [&](const std::string& device) {
    TrainConfig c = config(device, 3);
    c.proto.mutable_optimizer()->set_name("sgd");
    c.proto.mutable_optimizer()->set_momentum(0.9);
    return c;
  };
  Trainer cpu(sgd("cpu")), gpu(sgd("cuda"));
  for (int i = 0; i < 3; ++i) {
    cpu.train_step();
    gpu.train_step();
  }
  gpu.sync_device_metrics();
  for (int i = 0; i < 3; ++i)
    EXPECT_LE(std::abs(gpu.history()[i].loss - cpu.history()[i].loss),
              1e-5 * std::abs(cpu.history()[i].loss))
        << "step " << i + 1;
  EXPECT_EQ(gpu.optimizer().steps_taken(), 3);
  const auto c = cpu.model().named_parameters(), g = gpu.model().named_parameters();
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_LE(max_abs_diff(host_values(g[i].second), c[i].second.to_vector()), 1e-5) << c[i].first;
}

// fit() reads the metrics back one logging interval late; every step still arrives, exactly as
// the same steps run one by one and read back at the end.
TEST_F(DeviceTrainingTest, FitReadsEveryStepBackLate) {
  Trainer stepped(config("cuda", 7));
  for (int i = 0; i < 7; ++i) stepped.train_step();
  stepped.sync_device_metrics();
  TrainConfig late = config("cuda", 7, false, 3);
  late.proto.mutable_data()->clear_val_pattern();
  Trainer fitted(late);
  fitted.fit();
  ASSERT_EQ(fitted.history().size(), 7u);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(fitted.history()[i].loss, stepped.history()[i].loss) << "step " << i + 1;
    EXPECT_EQ(fitted.history()[i].grad_norm, stepped.history()[i].grad_norm) << "step " << i + 1;
  }
}

// Counts the host<->device copies of the DeviceMemoryOps (Tensor::to, copy_, item, to_vector,
// from_vector onto a device: each one waits for the device) while it lives.
class CountedCopies {
 public:
  CountedCopies() : saved_(device_memory(DeviceKind::cuda)) {
    real_ = saved_.copy;
    count_ = 0;
    DeviceMemoryOps counting = saved_;
    counting.copy = [](void* dst, Device dst_device, const void* src, Device src_device,
                       size_t bytes) {
      ++count_;
      real_(dst, dst_device, src, src_device, bytes);
    };
    register_device_memory(DeviceKind::cuda, counting);
  }
  ~CountedCopies() { register_device_memory(DeviceKind::cuda, saved_); }
  int count() const { return count_; }

 private:
  DeviceMemoryOps saved_;
  static inline int count_ = 0;
  static inline void (*real_)(void*, Device, const void*, Device, size_t) = nullptr;
};

// After two warm-up steps a step allocates nothing from the device (the caching allocator
// serves every tensor), issues nothing on the legacy default stream, and makes no host<->device
// copy that waits for the device: batches and metrics travel by copy_async on the copy stream.
TEST_F(DeviceTrainingTest, SteadyStepsMakeNoDeviceMallocs) {
  Trainer gpu(config("cuda", 6, false, 2));
  gpu.train_step();
  gpu.train_step();
  gpu.sync_device_metrics();
  const DeviceMemoryStats before = device_memory_stats(Device::cuda(0));
#ifdef BRAID_SIMT
  const simt::RuntimeCallCounts calls = simt::runtime_call_counts();
#endif
  {
    const CountedCopies copies;
    for (int i = 0; i < 4; ++i) gpu.train_step();
    EXPECT_EQ(copies.count(), 0) << "host<->device copies in 4 steady steps";
    host_values(gpu.model().named_parameters().front().second);
    EXPECT_EQ(copies.count(), 1) << "the counter missed a device-to-host copy";
  }
  gpu.sync_device_metrics();
  const DeviceMemoryStats after = device_memory_stats(Device::cuda(0));
  EXPECT_EQ(after.device_mallocs, before.device_mallocs);
  EXPECT_EQ(after.device_frees, before.device_frees);
  EXPECT_EQ(after.alloc_retries, before.alloc_retries);
  EXPECT_EQ(gpu.history().back().device_mallocs, after.device_mallocs);
  EXPECT_GT(gpu.history().back().device_reserved_bytes, 0);
#ifdef BRAID_SIMT
  const simt::RuntimeCallCounts now = simt::runtime_call_counts();
  EXPECT_EQ(now.malloc, calls.malloc);
  EXPECT_EQ(now.malloc_async, calls.malloc_async);
  EXPECT_EQ(now.free, calls.free);
  EXPECT_EQ(now.legacy_stream_ops, calls.legacy_stream_ops);
#endif
}

// A parameter poisoned with NaN makes every later step non-finite: with skip_nonfinite_steps
// the device skips them as the CPU does (same flags, same update count, the other parameters
// untouched since the last good step).
TEST_F(DeviceTrainingTest, NonFiniteStepsAreSkippedOnTheDevice) {
  for (const std::string device : {"cpu", "cuda"}) {
    SCOPED_TRACE(device);
    Trainer t(config(device, 5, /*skip_nonfinite=*/true));
    t.train_step();
    t.train_step();
    auto params = t.model().named_parameters();
    params[2].second.detach().fill_(std::nanf(""));
    std::vector<std::vector<float>> good;
    for (const auto& [name, p] : params) good.push_back(host_values(p));
    for (int i = 0; i < 3; ++i) t.train_step();
    t.sync_device_metrics();
    ASSERT_EQ(t.history().size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(t.history()[i].skipped, i >= 2) << "step " << i + 1;
    EXPECT_EQ(t.optimizer().steps_taken(), 2);
    for (size_t i = 0; i < params.size(); ++i)
      if (i != 2) EXPECT_EQ(host_values(params[i].second), good[i]) << params[i].first;
  }
}

// Without skip_nonfinite_steps the run stops, naming the first non-finite step, at the readback
// that finds it.
TEST_F(DeviceTrainingTest, ANonFiniteStepStopsTheRunNamingIt) {
  TrainConfig c = config("cuda", 6, /*skip_nonfinite=*/false, 2);
  c.proto.mutable_data()->clear_val_pattern();
  Trainer t(c);
  t.train_step();
  t.train_step();
  t.model().named_parameters()[2].second.detach().fill_(std::nanf(""));
  try {
    t.fit();
    ADD_FAILURE() << "fit() went on past a non-finite step";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not finite at step 3;"), std::string::npos)
        << e.what();
  }
}

}  // namespace braid::train::device_training
