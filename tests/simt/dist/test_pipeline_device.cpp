// PipelineParallel (pp = 2, 1F1B and interleaved 1F1B) with each stage on the emulated device,
// its transfers over the grid's device communicator (stand-in transport), against one CPU
// process training the same batch as the same micro-batches: per-step losses, each stage's
// gradients and AdamW-updated weights, then eval_loss and generate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/data/batch.h"
#include "braid/dist/parallel_grid.h"
#include "braid/nn/gpt.h"
#include "braid/optim/optimizer.h"
#include "braid/parallel/data_parallel.h"
#include "braid/parallel/pipeline/matched_order.h"
#include "braid/parallel/pipeline/pipeline_parallel.h"
#include "braid/parallel/pipeline/validate.h"
#include "cuda_runtime.cuh"
#include "device_test_values.h"
#include "dist/nccl_process_group.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

using parallel::pipeline::Action;
using parallel::pipeline::ActionKind;

constexpr int64_t kRows = 4;  // one batch of 4 sequences, 4 micro-batches of one
constexpr int64_t kSeq = 8;
constexpr int kMicro = 4;
constexpr float kLearningRate = 0.01f;
constexpr int kSteps = 3;

nn::GptConfig tiny_gpt() {
  nn::GptConfig c;
  c.vocab_size = 61;
  c.n_layer = 4;  // one block per virtual stage with 2 stages x 2 chunks
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = kSeq;
  return c;  // tied embeddings: the two ends' copies of wte are summed over the pipeline
}

// eps = 1e-3 keeps AdamW's update Lipschitz in the gradient (tests/simt/dist/
// test_data_parallel_device.cpp says why): round-off-sized gradients stay round-off-sized steps.
std::unique_ptr<optim::Optimizer> make_adamw(nn::Module& model) {
  optim::AdamWOptions options;
  options.eps = 1e-3f;
  return std::make_unique<optim::AdamW>(optim::decay_groups(model.named_parameters(), 0.1f),
                                        options);
}

struct TrainingTrace {
  std::vector<float> losses;           // per step
  std::vector<Values> grads, weights;  // per step
  float eval_loss = 0;                 // of the step-0 batch after training
  std::vector<int32_t> tokens;         // sampled after training
};

nn::SampleOptions sampling() {
  nn::SampleOptions o;
  o.max_new_tokens = 6;
  o.top_k = 3;
  o.seed = 11;
  return o;
}

const std::vector<int32_t> kPrompt = {5, 12, 19};

// One process on the CPU: the batch's micro-batches accumulated, each loss times 1 / kMicro.
TrainingTrace single_process_cpu() {
  nn::Gpt model(tiny_gpt());
  model.init_weights(3);
  std::unique_ptr<optim::Optimizer> optimizer = make_adamw(model);
  TrainingTrace run;
  const int64_t rows = kRows / kMicro;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    const data::Batch b = token_batch(0, kRows, kSeq, step);
    double loss = 0;
    for (int mb = 0; mb < kMicro; ++mb) {
      Tensor l =
          model.loss(b.inputs.narrow(0, mb * rows, rows), b.targets.narrow(0, mb * rows, rows));
      loss += l.item();
      l.backward(Tensor::full({}, 1.0f / kMicro));
    }
    run.losses.push_back(static_cast<float>(loss / kMicro));
    run.grads.push_back(read_values(model, true));
    optimizer->step(kLearningRate);
    run.weights.push_back(read_values(model, false));
  }
  autograd::NoGradGuard no_grad;
  const data::Batch b = token_batch(0, kRows, kSeq, 0);
  run.eval_loss = model.loss(b.inputs, b.targets).item();
  run.tokens = model.generate(kPrompt, sampling());
  return run;
}

// This rank's pipeline stage on cuda:0, driven like the Trainer drives a strategy.
TrainingTrace pipeline_device(const ProcessGroupPtr& world, const std::string& schedule,
                              int virtual_stages) {
  const Device device = Device::cuda(0);
  ParallelGrid grid(world, ParallelGrid::default_axes(1, 1, 1, 2), device, nccl_group_factory(0));
  parallel::pipeline::PipelineOptions options;
  options.stages = 2;
  options.micro_batches = kMicro;
  options.virtual_stages = virtual_stages;
  options.schedule = schedule;
  options.batch_size = kRows;
  options.seq_len = kSeq;
  parallel::pipeline::PipelineParallel pipeline(options,
                                                std::make_unique<parallel::SingleProcess>());
  nn::Gpt model(tiny_gpt(), nullptr, pipeline.model_part(tiny_gpt(), grid));
  model.init_weights(3);
  model.to(device);
  std::unique_ptr<optim::Optimizer> optimizer = make_adamw(model);
  pipeline.setup(model, *optimizer, grid);
  TrainingTrace run;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    const parallel::StepBatches batches{
        [&] {
          const data::Batch b = token_batch(0, kRows, kSeq, step);
          return data::Batch{b.inputs.to(device), b.targets.to(device)};
        },
        1, step};
    const parallel::StepLoss loss = pipeline.forward_backward(model, batches);
    EXPECT_TRUE(loss.device_loss.defined() && loss.device_loss.device() == device);
    pipeline.finish_backward();
    run.grads.push_back(read_values(model, true));
    pipeline.step(kLearningRate, 1.0f);
    run.weights.push_back(read_values(model, false));
    run.losses.push_back(loss.device_loss.item());
  }
  autograd::NoGradGuard no_grad;
  const data::Batch b = token_batch(0, kRows, kSeq, 0);
  run.eval_loss =
      static_cast<float>(pipeline.eval_loss(model, {b.inputs.to(device), b.targets.to(device)}));
  run.tokens = pipeline.generate(model, kPrompt, sampling());
  return run;
}

// fp32 with another summation order (device kernels, the tied embedding's two copies summed):
// each gradient within 1e-5 of its tensor's largest magnitude, weights within 1e-5 of
// max(scale, 1), the bounds of tests/dist/training_equivalence.cpp. A stage holds some of the
// parameters; each is compared with the same name in the whole model.
void expect_close(const Values& stage, const Values& whole, const std::string& what, bool weights) {
  ASSERT_FALSE(stage.empty()) << what;
  for (const auto& [name, got] : stage) {
    ASSERT_TRUE(whole.count(name)) << what << ": " << name << " is not a parameter of the GPT";
    const std::vector<float>& want = whole.at(name);
    ASSERT_EQ(got.size(), want.size()) << what << " " << name;
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    const float bound = weights ? 1e-5f * std::max(scale, 1.0f) : 1e-5f * scale + 1e-12f;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_LE(std::fabs(got[i] - want[i]), bound)
          << what << " " << name << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
}

void expect_matches_cpu(const TrainingTrace& pp, const TrainingTrace& cpu,
                        const std::string& what) {
  ASSERT_EQ(pp.losses.size(), cpu.losses.size());
  for (int step = 0; step < kSteps; ++step) {
    const std::string at = what + ", step " + std::to_string(step);
    EXPECT_LE(std::fabs(pp.losses[step] - cpu.losses[step]), 1e-5 * std::fabs(cpu.losses[step]))
        << at << ": loss " << pp.losses[step] << " vs " << cpu.losses[step];
    expect_close(pp.grads[step], cpu.grads[step], at + " gradients", false);
    expect_close(pp.weights[step], cpu.weights[step], at + " weights", true);
  }
  EXPECT_LE(std::fabs(pp.eval_loss - cpu.eval_loss), 1e-5 * std::fabs(cpu.eval_loss))
      << what << ": eval loss " << pp.eval_loss << " vs " << cpu.eval_loss;
  EXPECT_EQ(pp.tokens, cpu.tokens) << what << ": sampled tokens";
}

class PipelineDevice : public DistTest {
 protected:
  static void SetUpTestSuite() { cuda::ensure_registered(); }
};

TEST_F(PipelineDevice, OneFOneBMatchesOneCpuProcess) {
  if (size() != 2) GTEST_SKIP() << "pp = 2 fills 2 ranks, not " << size();
  expect_matches_cpu(pipeline_device(world_ptr(), "1f1b", 1), single_process_cpu(), "1f1b");
}

TEST_F(PipelineDevice, InterleavedOneFOneBMatchesOneCpuProcess) {
  if (size() != 2) GTEST_SKIP() << "pp = 2 fills 2 ranks, not " << size();
  expect_matches_cpu(pipeline_device(world_ptr(), "interleaved_1f1b", 2), single_process_cpu(),
                     "interleaved_1f1b v=2");
}

// The device order's two properties, for every schedule and a few shapes: each pair of stages
// lists the transfers between them in the same order (a send on one side where the other has
// the matching receive), and the lists still pass validate() (every receive before its use,
// no deadlock with asynchronous transfers).
TEST_F(PipelineDevice, MatchedOrderAgreesOnEveryPairAndValidates) {
  using namespace parallel::pipeline;
  for (auto [name, stages, micro, chunks] :
       std::vector<std::tuple<std::string, int, int, int>>{{"1f1b", 2, 4, 1},
                                                           {"1f1b", 4, 6, 1},
                                                           {"gpipe", 3, 3, 2},
                                                           {"interleaved_1f1b", 2, 4, 2},
                                                           {"interleaved_1f1b", 4, 5, 2},
                                                           {"interleaved_1f1b", 3, 6, 3}}) {
    const ScheduleShape shape{stages, micro, chunks};
    const Schedule schedule = make_schedule(name, shape);
    ComputeOrder computes;
    for (const std::vector<Action>& actions : schedule.stages)
      computes.push_back(compute_actions(actions, true));
    const Schedule matched{name, shape, matched_order(computes, shape)};
    const std::string what = fmt::format("{} {}x{}x{}", name, stages, micro, chunks);
    EXPECT_NO_THROW(validate(matched)) << what;
    for (int s = 0; s < stages; ++s) {
      EXPECT_EQ(compute_actions(matched.stages[s], true), computes[s]) << what;
      for (int d = 0; d < stages; ++d) {
        if (d == s) continue;
        // Transfers between s and d as s sees them, and as d sees them, written as
        // (from, kind of data, micro-batch, receiving virtual stage).
        auto transfers = [&](int self, int peer) {
          std::vector<std::tuple<int, bool, int, int>> out;
          for (const Action& a : matched.stages[self]) {
            const int k = shape.virtual_stage(self, a.chunk);
            const bool act =
                a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_activation;
            if (a.kind == ActionKind::send_activation || a.kind == ActionKind::send_gradient) {
              const int to = act ? k + 1 : k - 1;
              if (shape.stage_of(to) == peer) out.emplace_back(self, act, a.microbatch, to);
            } else if (!a.is_compute()) {
              const int from = act ? k - 1 : k + 1;
              if (shape.stage_of(from) == peer) out.emplace_back(peer, act, a.microbatch, k);
            }
          }
          return out;
        };
        const auto mine = transfers(s, d);
        EXPECT_FALSE(mine.empty() && (d == s + 1 || d == s - 1)) << what;
        EXPECT_EQ(mine, transfers(d, s)) << what << " stages " << s << " and " << d;
      }
    }
  }
}

}  // namespace
}  // namespace braid::dist::testing
