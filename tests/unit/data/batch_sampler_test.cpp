// Tests for BatchSampler: shifted targets, determinism, resume, data-parallel equivalence, order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/data/batch_sampler.h"
#include "braid/data/token_shard.h"
#include "support/test_util.h"

namespace braid::data {
namespace {

namespace fs = std::filesystem;

using braid::testing::contains;
using braid::testing::error_of;

std::vector<int32_t> values(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

// Every token encodes where it sits: shard s, position i -> s * 10000 + i. So a window's first
// token tells which shard and offset it came from, and contiguity is easy to check.
class BatchSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           fmt::format("braid_sampler_test_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    // Sizes chosen so shards hold different numbers of windows and leave uneven tails.
    const std::vector<int> sizes = {203, 97, 150};
    std::vector<fs::path> files;
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::vector<int32_t> tokens(sizes[s]);
      for (int i = 0; i < sizes[s]; ++i) tokens[i] = static_cast<int32_t>(s * 10000 + i);
      files.push_back(dir_ / fmt::format("shard_{:03}.bin", s));
      write_token_shard(files.back(), tokens);
    }
    dataset_ = std::make_unique<TokenDataset>(files);
  }
  void TearDown() override { fs::remove_all(dir_); }

  BatchSampler make(int64_t batch, int64_t seq, uint64_t seed, bool shuffle = true, int rank = 0,
                    int size = 1) const {
    return BatchSampler(*dataset_, SamplerConfig{batch, seq, seed, shuffle, rank, size});
  }

  fs::path dir_;
  std::unique_ptr<TokenDataset> dataset_;
};

TEST_F(BatchSamplerTest, TargetsAreInputsShiftedByOne) {
  BatchSampler sampler = make(4, 16, 7);
  for (int step = 0; step < 5; ++step) {
    const Batch batch = sampler.next();
    ASSERT_EQ(batch.inputs.shape(), (Shape{4, 16}));
    ASSERT_EQ(batch.targets.shape(), (Shape{4, 16}));
    ASSERT_EQ(batch.inputs.dtype(), DType::i32);
    const auto in = values(batch.inputs);
    const auto out = values(batch.targets);
    for (int b = 0; b < 4; ++b) {
      for (int t = 0; t < 16; ++t) {
        // Consecutive tokens of one shard: the window never crosses a shard boundary.
        ASSERT_EQ(out[b * 16 + t], in[b * 16 + t] + 1) << "row " << b << " col " << t;
      }
    }
  }
}

TEST_F(BatchSamplerTest, SameSeedSameBatchesOtherSeedOtherBatches) {
  BatchSampler a = make(3, 10, 42);
  BatchSampler b = make(3, 10, 42);
  BatchSampler c = make(3, 10, 43);
  bool any_difference = false;
  // Long enough to cross several epochs (the dataset has ~44 windows of 11 tokens).
  for (int step = 0; step < 40; ++step) {
    const auto va = values(a.next().inputs);
    ASSERT_EQ(va, values(b.next().inputs)) << "step " << step;
    any_difference |= va != values(c.next().inputs);
  }
  EXPECT_TRUE(any_difference);
}

TEST_F(BatchSamplerTest, EachEpochVisitsEveryWindowOnceInAFreshOrder) {
  BatchSampler sampler = make(2, 10, 5);
  const int64_t n = sampler.windows_per_epoch();
  ASSERT_GT(n, 10);
  std::vector<WindowRef> previous;
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<WindowRef> order;
    std::set<std::pair<int64_t, int64_t>> distinct;
    for (int64_t i = 0; i < n; ++i) {
      const WindowRef w = sampler.window_at(epoch, i);
      const int64_t shard_size = dataset_->shard(static_cast<size_t>(w.shard)).size();
      ASSERT_GE(w.start, 0);
      ASSERT_LE(w.start + 11, shard_size) << "window runs past its shard";
      distinct.insert({w.shard, w.start});
      order.push_back(w);
    }
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), n) << "epoch " << epoch << " repeats a window";
    EXPECT_NE(order, previous) << "epoch " << epoch << " repeats the previous order";
    previous = order;
  }
}

TEST_F(BatchSamplerTest, ResumeAfterRestoreGivesTheSameBatches) {
  BatchSampler original = make(3, 12, 99);
  for (int step = 0; step < 5; ++step) original.next();
  const SamplerState saved = original.state();
  EXPECT_EQ(saved.seed, 99u);

  // A fresh sampler built with another seed adopts the saved one on restore.
  BatchSampler resumed = make(3, 12, 1);
  resumed.restore(saved);
  EXPECT_EQ(resumed.state(), saved);
  for (int step = 0; step < 30; ++step) {  // crosses epoch boundaries
    ASSERT_EQ(values(original.next().inputs), values(resumed.next().inputs)) << "step " << step;
    ASSERT_EQ(original.state(), resumed.state());
  }
  EXPECT_GT(original.state().epoch, 0u);
}

TEST_F(BatchSamplerTest, EpochsEndOnWholeGlobalBatches) {
  BatchSampler sampler = make(4, 10, 3);
  const int64_t per_epoch = sampler.batches_per_epoch();
  ASSERT_EQ(per_epoch, sampler.windows_per_epoch() / 4);
  for (int64_t i = 0; i < per_epoch - 1; ++i) sampler.next();
  EXPECT_EQ(sampler.state().epoch, 0u);
  EXPECT_EQ(sampler.state().position, static_cast<uint64_t>(4 * (per_epoch - 1)));
  sampler.next();
  EXPECT_EQ(sampler.state(), (SamplerState{3, 1, 0}));
}

// dp = 2 ranks with B = 4 together see exactly the rows of dp = 1 with B = 8, step by step.
void expect_dp_equivalence(BatchSampler& single, BatchSampler& rank0, BatchSampler& rank1,
                           int steps) {
  for (int step = 0; step < steps; ++step) {
    const Batch whole = single.next();
    const Batch a = rank0.next();
    const Batch b = rank1.next();
    for (const auto member : {&Batch::inputs, &Batch::targets}) {
      std::vector<int32_t> joined = values(a.*member);
      const std::vector<int32_t> second = values(b.*member);
      joined.insert(joined.end(), second.begin(), second.end());
      ASSERT_EQ(joined, values(whole.*member)) << "step " << step;
    }
    ASSERT_EQ(single.state(), rank0.state());
    ASSERT_EQ(single.state(), rank1.state());
  }
}

TEST_F(BatchSamplerTest, DataParallelRanksSplitTheGlobalBatch) {
  BatchSampler single = make(8, 9, 11);
  BatchSampler rank0 = make(4, 9, 11, true, 0, 2);
  BatchSampler rank1 = make(4, 9, 11, true, 1, 2);
  EXPECT_EQ(rank0.global_batch_size(), 8);
  EXPECT_EQ(rank0.batches_per_epoch(), single.batches_per_epoch());
  expect_dp_equivalence(single, rank0, rank1, 20);
}

TEST_F(BatchSamplerTest, DataParallelSequentialMode) {
  BatchSampler single = make(6, 7, 0, false);
  BatchSampler rank0 = make(3, 7, 0, false, 0, 2);
  BatchSampler rank1 = make(3, 7, 0, false, 1, 2);
  expect_dp_equivalence(single, rank0, rank1, 12);
}

TEST_F(BatchSamplerTest, StateSavedUnderOneLayoutRestoresUnderAnother) {
  BatchSampler rank1 = make(2, 10, 8, true, 1, 3);  // global batch 6
  for (int step = 0; step < 3; ++step) rank1.next();
  BatchSampler single = make(6, 10, 8);
  for (int step = 0; step < 3; ++step) single.next();
  ASSERT_EQ(rank1.state(), single.state());

  BatchSampler restored = make(6, 10, 0);
  restored.restore(rank1.state());
  for (int step = 0; step < 10; ++step) {
    ASSERT_EQ(values(single.next().inputs), values(restored.next().inputs)) << "step " << step;
  }
}

TEST_F(BatchSamplerTest, SequentialModeCoversTheDataInOrderAndResets) {
  const int64_t t = 10;
  BatchSampler sampler = make(2, t, 123, false);
  // Windows in file order, each starting where the previous one's inputs end.
  int64_t expected_windows = 0;
  for (const auto& shard : dataset_->shards()) expected_windows += (shard.size() - 1) / t;
  ASSERT_EQ(sampler.windows_per_epoch(), expected_windows);
  int64_t index = 0;
  for (size_t s = 0; s < dataset_->num_shards(); ++s) {
    for (int64_t k = 0; k < (dataset_->shard(s).size() - 1) / t; ++k) {
      ASSERT_EQ(sampler.window_at(0, index), (WindowRef{static_cast<int64_t>(s), k * t}));
      ASSERT_EQ(sampler.window_at(3, index), sampler.window_at(0, index)) << "order is fixed";
      ++index;
    }
  }

  std::vector<std::vector<int32_t>> first_pass;
  for (int64_t i = 0; i < sampler.batches_per_epoch(); ++i) {
    first_pass.push_back(values(sampler.next().inputs));
  }
  EXPECT_EQ(first_pass.front()[0], 0);   // shard 0, token 0
  EXPECT_EQ(first_pass.front()[t], 10);  // the second row continues where the first ends
  sampler.reset();
  EXPECT_EQ(sampler.state(), (SamplerState{123, 0, 0}));
  for (const auto& expected : first_pass) ASSERT_EQ(values(sampler.next().inputs), expected);
}

TEST_F(BatchSamplerTest, RejectsBadConfigAndForeignState) {
  std::string message = error_of([&] { make(100, 10, 0); });
  EXPECT_TRUE(contains(message, "fewer than one global batch"));
  EXPECT_TRUE(contains(message, "shard_000.bin"));
  EXPECT_TRUE(contains(error_of([&] { make(2, 10, 0, true, 2, 2); }), "dp_rank 2"));
  EXPECT_TRUE(contains(error_of([&] { make(0, 10, 0); }), "batch_size must be >= 1"));

  BatchSampler sampler = make(2, 10, 0);
  message = error_of([&] { sampler.restore({0, 0, 1000000}); });
  EXPECT_TRUE(contains(message, "position 1000000"));
  EXPECT_TRUE(contains(message, "windows per epoch"));
}

}  // namespace
}  // namespace braid::data
