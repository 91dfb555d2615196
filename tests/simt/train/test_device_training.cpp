// The Trainer on the emulated device: braid's CUDA kernels under the SIMT checker, device memory
// guarded (any host read or write of it dies with a stack trace, so a training run that
// finishes touched none).
#include <gtest/gtest.h>

#include "device_training_cases.h"

namespace braid::train::device_training {
namespace {

// The guard is on in this process: reading a trained parameter's memory from the host dies.
TEST_F(DeviceTrainingTest, TheHostCannotTouchTheModelOnTheDevice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Trainer t(config("cuda", 2));
  t.train_step();
  t.sync_device_metrics();
  const Tensor weight = t.model().named_parameters().front().second;
  EXPECT_DEATH(
      {
        volatile float read = static_cast<const float*>(weight.data_ptr())[0];
        (void)read;
      },
      "SEGV on unknown address");
}

}  // namespace
}  // namespace braid::train::device_training
