// The fixture of the 2-rank tests whose ranks each train on an emulated device of their own
// (their local rank): it skips, saying how to run them, unless the job has both.
#pragma once

#include <gtest/gtest.h>

#include "cuda_runtime.cuh"
#include "dist_test.h"

namespace braid::dist::testing {

class TwoDeviceTest : public DistTest {
 protected:
  // A derived SetUp calls this first and returns when IsSkipped().
  void SetUp() override {
    if (size() != 2) GTEST_SKIP() << "these layouts are for 2 ranks";
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < size())
      GTEST_SKIP() << "each rank trains on its own device (local rank): run with "
                      "BRAID_SIMT_DEVICES=2 (ctest simt.dist.trainer.np2)";
  }
};

}  // namespace braid::dist::testing
