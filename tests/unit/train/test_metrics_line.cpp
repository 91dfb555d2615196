// The metrics line: the fields of every step, and the device allocator's memory on a device.
#include <gtest/gtest.h>

#include "braid/train/metrics.h"

namespace braid::train {
namespace {

StepMetrics sample_step() {
  StepMetrics m;
  m.step = 9;
  m.loss = 2.5f;
  m.lr = 1e-3f;
  m.grad_norm = 0.75;
  m.step_ms = 120;
  m.tokens_per_s = 4000;
  m.mfu = 0.25;
  m.peak_bytes = int64_t{3} << 20;
  return m;
}

TEST(MetricsLine, HostStepsShowNoDeviceMemory) {
  EXPECT_EQ(format_step(sample_step(), 100),
            "step    10/100 | loss 2.5000 | lr 1.00e-03 | norm 0.750 | 120 ms | 4000 tok/s | "
            "MFU 25.0% | peak 3 MiB");
}

TEST(MetricsLine, DeviceStepsShowTheAllocator) {
  StepMetrics m = sample_step();
  m.on_device = true;
  m.device_allocated_bytes = int64_t{310} << 20;
  m.device_reserved_bytes = int64_t{512} << 20;
  m.device_peak_bytes = int64_t{400} << 20;
  m.device_mallocs = 12;
  m.skipped = true;
  EXPECT_EQ(format_step(m, 100),
            "step    10/100 | loss 2.5000 | lr 1.00e-03 | norm 0.750 | 120 ms | 4000 tok/s | "
            "MFU 25.0% | peak 3 MiB | SKIPPED | device 310/512 MiB, peak 400 MiB, 12 mallocs");
}

}  // namespace
}  // namespace braid::train
