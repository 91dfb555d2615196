// PipelineParallel: pipeline parallelism as a Strategy, wrapping the data-parallel strategy.
//
// It places this rank's stage of the GPT before the model is built (model_part), shares the
// tied embedding's two copies, and runs the step, evaluation and sampling through the
// schedule's runtime; the wrapped strategy (none, ddp, zero1 or one registered from outside)
// keeps the gradient hooks, clipping, the update and the checkpoint state. So pp composes
// with data parallelism without either knowing the other: DDP reduces each stage's gradients
// over its dp group from the hooks of the stage's final backward, ZeRO-1 shards each stage's
// optimizer state over its dp group.
//
// Collective over the grid's pp group (model_part makes no collective; setup splits the pp
// group for the tied embedding; forward_backward and eval_loss run the schedule and sum the
// last stage's losses over pp; generate broadcasts the logits from the last stage), besides
// whatever the wrapped strategy issues. A wrapped strategy's own forward_backward,
// eval_loss and generate are not called: the pipeline runs the step.
//
// A model on a device (its parameters there at setup; the grid with device communicators): the
// runtime keeps its buffers there and sends over grid.group_for("pp", device), the losses are
// summed over pp there (forward_backward's StepLoss::device_loss, nothing read back; eval_loss
// reads its mean once) and generate broadcasts the logits there (one read per stage and token).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/parallel/pipeline/runtime.h"
#include "braid/parallel/strategy_wrapper.h"

namespace braid::parallel::pipeline {

struct PipelineOptions {
  int stages = 2;                     // parallel.pp (the grid's pp axis must match)
  int micro_batches = 0;              // per step; 0: one per stage
  int virtual_stages = 1;             // model chunks per stage (interleaving)
  std::string schedule = "auto";      // auto: interleaved_1f1b with virtual stages, else 1f1b
  std::vector<int64_t> stage_layers;  // blocks per virtual stage; empty: an even split
  int64_t batch_size = 1;             // sequences in this rank's batch (training.batch_size)
  int64_t seq_len = 1;                // tokens per sequence (training.seq_len)
  bool sequence_parallel = false;     // activations hold seq_len / tp positions
};

class PipelineParallel final : public StrategyWrapper {
 public:
  // Builds the schedule and validates it (a schedule that could deadlock never runs).
  PipelineParallel(PipelineOptions options, std::unique_ptr<Strategy> data_parallel);

  std::string name() const override;
  // This stage's blocks (its chunks), plus the embeddings on the first virtual stage's rank
  // and ln_f + head on the last one's; also makes the runtime for this stage.
  nn::GptStagePart model_part(const nn::GptConfig& config, const dist::ParallelGrid& grid) override;
  // With a tied head, the first and last stage each hold wte.weight; their gradients are
  // summed over a group of those two stages (the first stage's copy counts in the norm).
  // The wrapped strategy is told before its own setup. A model on a device moves the runtime
  // and the pp group (and the tied embedding's group) to the grid's device communicator.
  void setup(nn::Module& model, optim::Optimizer& optimizer,
             const dist::ParallelGrid& grid) override;
  // One batch cut into the micro-batches, through the schedule; the loss is the batch's mean
  // on every stage. Traced with the rest of the step (training.trace_steps): each action is a
  // span of the stage's compute track.
  StepLoss forward_backward(const nn::Gpt& model, const StepBatches& batches) override;
  double eval_loss(const nn::Gpt& model, const data::Batch& batch) override;
  // Every stage returns the same tokens.
  std::vector<int32_t> generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                const nn::SampleOptions& options) override;

  const Schedule& schedule() const { return schedule_; }

 private:
  StageCompute compute(const nn::Gpt& model, const data::Batch& batch) const;
  double mean_over_stages(double loss_sum) const;
  Tensor mean_over_stages(Tensor loss_sum) const;  // on the device
  std::vector<float> last_logits(const nn::Gpt& model, const std::vector<int32_t>& window);
  PipelineRuntime& runtime();  // throws before model_part

  PipelineOptions options_;
  Schedule schedule_;
  int stage_ = 0;
  bool tie_embeddings_ = true;
  dist::ProcessGroupPtr group_;               // pp (the device communicator on a device)
  Shape activation_shape_;                    // one micro-batch's activation between stages
  Device device_ = Device::cpu();             // where the stage's parameters live (setup)
  std::unique_ptr<PipelineRuntime> runtime_;  // made by model_part (again by setup on a device)
};

}  // namespace braid::parallel::pipeline
