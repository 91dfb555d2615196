// DataParallel with its parameters on the emulated device, over the grid's device communicators
// (stand-in transport), against single-process training on the CPU: the reduced gradients and
// the updated weights of a 2-layer tiny GPT.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/dist/parallel_grid.h"
#include "braid/nn/gpt.h"
#include "braid/optim/optimizer.h"
#include "braid/parallel/data_parallel.h"
#include "cuda_runtime.cuh"
#include "device_test_values.h"
#include "dist/nccl_process_group.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

constexpr int64_t kRows = 4;  // the global batch, split evenly over the ranks
constexpr int64_t kSeq = 8;
constexpr float kLearningRate = 0.1f;
constexpr int kSteps = 2;

nn::GptConfig tiny_gpt() {
  nn::GptConfig c;
  c.vocab_size = 61;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = kSeq;
  return c;
}

struct TrainingTrace {
  std::vector<Values> grads, weights;  // per step
};

optim::Optimizer* make_sgd(nn::Module& model) {
  return new optim::Sgd(optim::decay_groups(model.named_parameters(), 0.0f), 0.0f);
}

// eps = 1e-3 keeps AdamW's update Lipschitz in the gradient: with the usual 1e-8 an update
// divides by sqrt(v) ~ |g|, so gradients that are zero up to round-off (the key bias, whose exact
// gradient is zero) would turn their last-bit differences into steps of lr.
optim::Optimizer* make_adamw(nn::Module& model) {
  optim::AdamWOptions options;
  options.eps = 1e-3f;
  return new optim::AdamW(optim::decay_groups(model.named_parameters(), 0.1f), options);
}

// One process on the CPU, the whole batch: the reference.
TrainingTrace single_process_cpu(optim::Optimizer* (*make)(nn::Module&)) {
  nn::Gpt model(tiny_gpt());
  model.init_weights(3);
  std::unique_ptr<optim::Optimizer> optimizer(make(model));
  TrainingTrace run;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    auto [ids, targets] = token_batch(0, kRows, kSeq, step);
    model.loss(ids, targets).backward();
    run.grads.push_back(read_values(model, true));
    optimizer->step(kLearningRate);
    run.weights.push_back(read_values(model, false));
  }
  return run;
}

// The same model on cuda:0 of every rank under DataParallel, each rank its rows of the batch.
TrainingTrace data_parallel_device(const ProcessGroupPtr& world, bool zero1,
                                   optim::Optimizer* (*make)(nn::Module&)) {
  nn::Gpt model(tiny_gpt());
  model.init_weights(3);
  model.to(Device::cuda(0));
  std::unique_ptr<optim::Optimizer> optimizer(make(model));
  ParallelGrid grid(world, ParallelGrid::default_axes(1, 1, world->size(), 1), Device::cuda(0),
                    nccl_group_factory(0));
  parallel::DataParallelOptions options;
  options.bucket_mb = 0.01;  // several buckets, so their order and the hooks matter
  options.zero1 = zero1;
  parallel::DataParallel dp(options);
  dp.setup(model, *optimizer, grid);
  EXPECT_GT(dp.num_buckets(), 2u);
  const int64_t rows = kRows / world->size();
  TrainingTrace run;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    auto [ids, targets] = token_batch(world->rank() * rows, rows, kSeq, step);
    dp.begin_backward(true);
    model.loss(ids.to(Device::cuda(0)), targets.to(Device::cuda(0))).backward();
    dp.finish_backward();
    EXPECT_EQ(dp.buckets_launched_during_backward(), dp.num_buckets());
    if (!zero1) run.grads.push_back(read_values(model, true));
    dp.step(kLearningRate, 1.0f);
    run.weights.push_back(read_values(model, false));
  }
  return run;
}

// fp32 with another summation order (half batches averaged, device kernels): each gradient within
// 1e-5 of its tensor's largest magnitude (a few ulps of the accumulations' scale); weights within
// 1e-5 of max(scale, 1), the bound of tests/dist/training_equivalence.cpp.
void expect_close(const Values& actual, const Values& expected, const std::string& what,
                  bool weights) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, want] : expected) {
    const std::vector<float>& got = actual.at(name);
    ASSERT_EQ(got.size(), want.size()) << what << " " << name;
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    const float bound = weights ? 1e-5f * std::max(scale, 1.0f) : 1e-5f * scale + 1e-12f;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_LE(std::fabs(got[i] - want[i]), bound)
          << what << " " << name << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
}

void expect_bitwise(const Values& actual, const Values& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, want] : expected) {
    const std::vector<float>& got = actual.at(name);
    ASSERT_EQ(got.size(), want.size()) << what << " " << name;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << what << " " << name << "[" << i << "]";
  }
}

class DataParallelDevice : public DistTest {
 protected:
  static void SetUpTestSuite() { cuda::ensure_registered(); }
};

TEST_F(DataParallelDevice, DdpMatchesOneCpuProcess) {
  if (kRows % size() != 0) GTEST_SKIP() << kRows << " rows do not split over " << size();
  const TrainingTrace cpu = single_process_cpu(&make_sgd);
  const TrainingTrace ddp = data_parallel_device(world_ptr(), false, &make_sgd);
  for (int step = 0; step < kSteps; ++step) {
    expect_close(ddp.grads[step], cpu.grads[step], "ddp gradients, step " + std::to_string(step),
                 false);
    expect_close(ddp.weights[step], cpu.weights[step], "ddp weights, step " + std::to_string(step),
                 true);
  }
}

// ZeRO-1 reduce-scatters each bucket into the same chunks (same ring order) that DDP's
// all-reduce computes, and runs the same AdamW on its shard: bitwise DDP's weights. Both against
// one CPU process with AdamW within the bounds above.
TEST_F(DataParallelDevice, Zero1MatchesDdpBitwiseAndOneCpuProcess) {
  if (kRows % size() != 0) GTEST_SKIP() << kRows << " rows do not split over " << size();
  const TrainingTrace cpu = single_process_cpu(&make_adamw);
  const TrainingTrace ddp = data_parallel_device(world_ptr(), false, &make_adamw);
  const TrainingTrace zero1 = data_parallel_device(world_ptr(), true, &make_adamw);
  for (int step = 0; step < kSteps; ++step) {
    const std::string at = ", step " + std::to_string(step);
    expect_bitwise(zero1.weights[step], ddp.weights[step], "zero1 vs ddp weights" + at);
    expect_close(ddp.grads[step], cpu.grads[step], "ddp gradients (adamw run)" + at, false);
    expect_close(zero1.weights[step], cpu.weights[step], "zero1 weights" + at, true);
  }
}

}  // namespace
}  // namespace braid::dist::testing
