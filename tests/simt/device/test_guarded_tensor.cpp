// Guarded device memory at the level braid's code sees it: a host read or write of a cuda
// Tensor's data dies with a stack trace naming the code that did it, while the runtime's copies
// go through.
#include <gtest/gtest.h>

#include <vector>

#include "braid/core/tensor.h"
#include "cuda_runtime.cuh"

namespace braid {
namespace {

Tensor device_tensor() {
  cuda::ensure_registered();  // cuda Storage's memory functions come with the kernel table
  return Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}).to(Device::cuda(0));
}

TEST(SimtGuardedMemory, CopiesToAndFromTheDeviceGoThrough) {
  EXPECT_EQ(device_tensor().to(Device::cpu()).to_vector(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(SimtGuardedMemoryDeathTest, AHostReadOfADeviceTensorFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor t = device_tensor();
  EXPECT_DEATH(
      {
        volatile float read = static_cast<const float*>(t.data_ptr())[2];
        (void)read;
      },
      "SEGV on unknown address.*AHostReadOfADeviceTensorFaults");
}

TEST(SimtGuardedMemoryDeathTest, AHostWriteOfADeviceTensorFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Tensor t = device_tensor();
  EXPECT_DEATH({ static_cast<volatile float*>(t.data_ptr())[0] = 5.0f; },
               "SEGV on unknown address.*AHostWriteOfADeviceTensorFaults");
}

}  // namespace
}  // namespace braid
