// PipelineDriver: the Trainer's pipeline-parallel step (pp > 1): which part of the GPT this
// stage holds, the tied embedding's shared copies, and one step or evaluation batch run
// through the schedule's runtime.
#pragma once

#include <memory>
#include <vector>

#include "braid/data/batch_sampler.h"
#include "braid/dist/parallel_grid.h"
#include "braid/nn/gpt.h"
#include "braid/parallel/pipeline/runtime.h"
#include "braid/parallel/strategy.h"
#include "braid/train/config.h"

namespace braid::train {

class PipelineDriver {
 public:
  // Builds the schedule named by the config (validated deadlock-free) and this stage's
  // runtime.
  PipelineDriver(const TrainConfig& config, const dist::ParallelGrid& grid);

  // The blocks, embeddings and head this stage holds.
  nn::GptStagePart part() const { return part_; }
  // With a tied head, the first and last stage each hold wte.weight; their gradients are
  // summed over a group of those two stages (the first stage's copy counts in the norm).
  // Collective over the pp group.
  std::vector<parallel::SharedParameter> shared_parameters(const nn::Gpt& model) const;

  // One optimizer step's forward and backward over the micro-batches of `batch`; returns the
  // mean loss on every stage. With `trace_path`, writes a Chrome trace of the whole pipeline.
  double train(const nn::Gpt& model, parallel::Strategy& strategy, const data::Batch& batch,
               const std::string& trace_path = "");
  // The mean loss of `batch` (forward only).
  double evaluate(const nn::Gpt& model, const data::Batch& batch);
  // Continues `prompt` through the pipeline; every stage returns the same tokens.
  std::vector<int32_t> generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                const nn::SampleOptions& options);

  const parallel::pipeline::Schedule& schedule() const { return runtime_->schedule(); }

 private:
  parallel::pipeline::StageCompute compute(const nn::Gpt& model, const data::Batch& batch) const;
  double mean_over_stages(double loss_sum) const;
  std::vector<float> last_logits(const nn::Gpt& model, const std::vector<int32_t>& window);

  const dist::ParallelGrid& grid_;
  int stage_;
  bool tie_embeddings_;
  bool sequence_parallel_;
  nn::GptStagePart part_;
  std::unique_ptr<parallel::pipeline::PipelineRuntime> runtime_;
};

}  // namespace braid::train
