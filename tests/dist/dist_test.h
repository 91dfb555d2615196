// Shared pieces of the multi-rank gtest binary: a fixture giving every test the world group
// and making a failure on any rank fail the test on all ranks (so rank 0's report shows it).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/dist/bootstrap.h"
#include "braid/dist/process_group.h"

namespace braid::dist::testing {

class DistTest : public ::testing::Test {
 protected:
  static ProcessGroup& world() { return *environment().world(); }
  static const ProcessGroupPtr& world_ptr() { return environment().world(); }
  static int rank() { return world().rank(); }
  static int size() { return world().size(); }

  // Collective over the world: every rank learns which ranks saw a failure in this test.
  void TearDown() override;
};

// Reads element i of any dtype as double (exact for every value these tests use).
double value_at(const Tensor& t, int64_t i);
// The 16-bit pattern of element i of a bf16 or f16 tensor.
uint16_t bits_at(const Tensor& t, int64_t i);

}  // namespace braid::dist::testing
