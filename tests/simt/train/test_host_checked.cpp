// Ids the host checked before copying them to the device are not read back: the ops trust
// the recorded range (proved by device values that contradict it going through unread), check
// it, and count the ignored targets from it; unmarked device ids are read back and checked.
#include <gtest/gtest.h>

#include <vector>

#include "braid/ops/embedding.h"
#include "braid/ops/host_checked.h"
#include "braid/ops/loss.h"
#include "device_training_fixture.h"

namespace braid::train::device_training {
namespace {

const Device kGpu = Device::cuda(0);

// A device tensor holding `device_values` whose recorded facts are those of `host_values`.
Tensor marked(const std::vector<int32_t>& host_values, const std::vector<int32_t>& device_values) {
  const Tensor host = Tensor::from_vector(host_values, {static_cast<int64_t>(host_values.size())});
  Tensor dev = Tensor::from_vector(device_values, host.shape()).to(kGpu);
  ops::mark_host_checked(dev, ops::host_check(host));
  return dev;
}

TEST(HostChecked, FactsCountMinusOnesAndRangeTheRest) {
  const ops::HostCheckedIds f =
      ops::host_check(Tensor::from_vector(std::vector<int32_t>{4, -1, 9, 2, -1}, {5}));
  EXPECT_EQ(f.min, 2);
  EXPECT_EQ(f.max, 9);
  EXPECT_EQ(f.minus_ones, 2);
  const ops::HostCheckedIds none =
      ops::host_check(Tensor::from_vector(std::vector<int32_t>{-1, -1}, {2}));
  EXPECT_LT(none.max, none.min);
  EXPECT_EQ(none.minus_ones, 2);
}

TEST(HostChecked, MarkedIdsAreNotReadBack) {
  if (!have_cuda_device()) GTEST_SKIP() << "no CUDA device";
  const Tensor weight = Tensor::full({10, 4}, 0.5f).to(kGpu);
  // The device holds an id past the table; the host recorded 0..3: the op trusts the record.
  EXPECT_NO_THROW(embedding(weight, marked({0, 1, 2, 3}, {0, 1, 2, 99})));
  // Unmarked, the same device ids are read back and rejected.
  const Tensor plain = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 99}, {4}).to(kGpu);
  EXPECT_THROW(embedding(weight, plain), Error);
  // A record outside the table is rejected without a read.
  EXPECT_THROW(embedding(weight, marked({0, 10}, {0, 1})), Error);
}

TEST(HostChecked, CrossEntropyCountsTargetsFromTheRecord) {
  if (!have_cuda_device()) GTEST_SKIP() << "no CUDA device";
  const Tensor logits_host =
      Tensor::from_vector(std::vector<float>{1, 2, 3, 0, 1, 0, 2, 2, 1, 0, 0, 4}, {4, 3});
  const Tensor targets_host = Tensor::from_vector(std::vector<int32_t>{2, -1, 0, 1}, {4});
  const float want = cross_entropy(logits_host, targets_host).item();
  const Tensor logits = logits_host.to(kGpu);
  // The record says one target is ignored, as the device values say: the mean over three.
  EXPECT_NEAR(cross_entropy(logits, marked({2, -1, 0, 1}, {2, -1, 0, 1})).item(), want,
              1e-6 * std::abs(want));
  // The device count comes from the record alone: one that says none is ignored divides by 4.
  const float by_four = cross_entropy(logits, marked({2, 2, 0, 1}, {2, -1, 0, 1})).item();
  EXPECT_NEAR(by_four, want * 3.0f / 4.0f, 1e-6 * std::abs(want));
  EXPECT_THROW(cross_entropy(logits, marked({2, 3, 0, 1}, {2, 1, 0, 1})), Error);
}

}  // namespace
}  // namespace braid::train::device_training
