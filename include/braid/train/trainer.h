// Trainer: the training loop over a config (model, data, optimizer, schedule), in any layout.
//
// One optimizer step = the strategy's forward and backward over the step's micro-batches
// (parallel::Strategy::forward_backward: gradient accumulation, or a pipeline's schedule),
// global-norm clipping fused into the update, periodic validation and sampling, a metrics line
// per log_every steps. The Trainer never branches on the layout: the strategy owns the step.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "braid/ckpt/checkpoint.h"
#include "braid/data/batch_sampler.h"
#include "braid/data/tokenizer.h"
#include "braid/dist/parallel_grid.h"
#include "braid/nn/gpt.h"
#include "braid/optim/clip.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/schedule.h"
#include "braid/parallel/strategy.h"
#include "braid/train/config.h"
#include "braid/train/device_batches.h"
#include "braid/train/device_metrics.h"
#include "braid/train/metrics.h"
#include "braid/train/step_trace.h"

namespace braid::train {

// The model shape a config describes.
nn::GptConfig gpt_config(const TrainConfig& config);

// Loads the tokenizer named by data.tokenizer ("gpt2" from data.vocab_dir, or "byte").
std::unique_ptr<data::Tokenizer> load_tokenizer(const TrainConfig& config);

// The device communicators' factory for cuda:`device` (dist::nccl_group_factory fits).
using DeviceGroupsFor = std::function<dist::DeviceGroupFactory(int device)>;

class MetricsFile;  // src/train/metrics_file.h

class Trainer {
 public:
  // Builds the grid over `world` (null: this process alone), the model (initialised from
  // training.seed), optimizer, parallel strategy and samplers; opens the data (errors name
  // missing or corrupt shards and out-of-vocabulary ids). Collective over `world`.
  //
  // `device_groups` makes the grid's device communicators for cuda:N (dist::nccl_group_factory
  // of braid_nccl; braid_nccl_simt's on the emulated device), needed when training.device is
  // cuda and a layout axis is > 1. It is handed in rather than registered process-wide: libbraid
  // never links NCCL, a static-initialiser registration inside the braid_nccl archive would be
  // dropped by the linker unless something referenced it, and the grid keeps no global group
  // state; whoever links the backend says so here. Without it such a layout is a clear error.
  explicit Trainer(TrainConfig config, dist::ProcessGroupPtr world = nullptr,
                   DeviceGroupsFor device_groups = {});
  ~Trainer();

  // Runs the remaining steps up to training.steps; validation every val_every steps and at the
  // end. Throws on a non-finite loss unless training.skip_nonfinite_steps is set. A SIGTERM,
  // SIGINT or SIGUSR1 (braid/train/stop_signals.h) on any rank stops every rank after the same
  // step, with a checkpoint of it when checkpoint.dir is set; stopped_by() then names the signal.
  void fit();
  // The signal that stopped the last fit() (0: it ran to the end).
  int stopped_by() const { return stopped_by_; }
  // Collective over the world: the signal some rank received since fit() began (0: none). A
  // custom loop that installs braid::train::StopSignals calls it between steps.
  int stop_requested();
  // One optimizer step (all micro-batches). Public for tests and custom loops. On a device
  // (training.device cuda) the step's loss, gradient norm and skip flag stay there: the
  // returned metrics and history() hold them (loss and grad_norm NaN until then) once
  // sync_device_metrics() or a later logged step of fit() has read them back.
  StepMetrics train_step();
  // On a device: waits for the metrics of every step so far and puts them into history();
  // throws, naming the first one, when a step was not finite and training.skip_nonfinite_steps
  // is off. fit() calls it at the end and before every checkpoint. A no-op on the CPU.
  void sync_device_metrics();
  // Mean validation loss over val_steps batches from the start of the validation set.
  float evaluate();
  // Checkpoints the current state into checkpoint.dir (collective over the world). In
  // overlapped mode this opens the window and the checkpoint lands window - 1 steps later;
  // `now` saves the current state at once whatever the mode.
  void save_checkpoint(bool now = false);
  // Waits for an asynchronous checkpoint write to commit (rethrows its error).
  void wait_for_checkpoint();
  // Sizes the checkpoint snapshot buffer and faults it in off the training thread
  // (Checkpointer::prepare). fit() calls it after its first step; loops of their own call it
  // once a first step has made the optimizer state. A no-op without checkpointing.
  void prepare_checkpoint();

  // Continues `prompt` with the sample settings of the config. Collective over the model's
  // tensor- and pipeline-parallel ranks: the ranks where samples_here() is true call it
  // together.
  std::string sample(const std::string& prompt);
  // True on the ranks of the first model replica (every coordinate but tp and pp is 0),
  // which generate samples together; world rank 0 is one of them.
  bool samples_here() const;

  nn::Gpt& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  parallel::Strategy& strategy() { return *strategy_; }
  const dist::ParallelGrid& grid() const { return *grid_; }
  // True on the rank that prints progress (world rank 0).
  bool is_lead() const { return grid_->world()->rank() == 0; }
  // Where the model trains (training.device): the CPU or this rank's CUDA device.
  Device device() const { return device_; }
  const TrainConfig& config() const { return config_; }
  // Null without checkpoint.dir.
  const ckpt::Checkpointer* checkpointer() const { return checkpointer_.get(); }
  const std::vector<StepMetrics>& history() const { return history_; }
  const std::vector<std::pair<int64_t, float>>& val_history() const { return val_history_; }
  int64_t step() const { return step_; }

  // Replaces the training batches (tests and custom data): called for every batch a step
  // consumes (grad_accum_steps of them; one under a pipeline, cut into its micro-batches).
  void set_batch_source(std::function<data::Batch()> source) {
    batch_source_ = std::move(source);
    if (device_batches_) device_batches_->drop_staged();
    staged_sampler_state_.reset();
  }
  // The current source (by default the training sampler's next batch), for a source that wraps it.
  const std::function<data::Batch()>& batch_source() const { return batch_source_; }

 private:
  ckpt::TrainingState training_state() const;
  // train_step's work inside its trace span; fills the phase split of the metrics.
  StepMetrics run_step();
  struct PhaseClocks;
  // The batches of the next step: batch_source_, or on a device the ones staged there ahead.
  std::function<data::Batch()> step_batches();
  // On the host: the step's loss and norm into `m`, and whether its update is skipped (a
  // non-finite one; an error unless skip_nonfinite_steps).
  void host_verdict(const parallel::StepLoss& pass, const optim::ClipResult& clip, StepMetrics& m);
  // On a device: the step's record (loss, norm, scale, skip flag; f32[ops::kStepRecord] there),
  // which the update reads; nothing comes back to the host.
  Tensor device_verdict(const parallel::StepLoss& pass, const optim::ClipResult& clip);
  // Copies what the device reported into history_, applies the skip counts to the optimizer,
  // logs the steps fit() logs (`log`), and throws on a non-finite step unless they are skipped.
  void absorb(const std::vector<DeviceReadback>& readbacks, bool log);
  // On a device: issues a readback of the steps not yet read and absorbs all of them.
  void drain_device_metrics(bool log);

  TrainConfig config_;
  std::unique_ptr<dist::ParallelGrid> grid_;
  std::unique_ptr<nn::Gpt> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<parallel::Strategy> strategy_;
  std::unique_ptr<ckpt::Checkpointer> checkpointer_;  // checkpoint.dir set
  std::set<std::string> not_saved_here_;              // shared copies another rank writes
  optim::LrSchedule schedule_;
  std::optional<data::BatchSampler> train_sampler_, val_sampler_;
  std::function<data::Batch()> batch_source_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::vector<StepMetrics> history_;
  std::vector<std::pair<int64_t, float>> val_history_;
  int64_t step_ = 0;
  int stopped_by_ = 0;
  Device device_;
  std::unique_ptr<DeviceBatches> device_batches_;  // on a device
  std::unique_ptr<DeviceMetrics> device_metrics_;  // on a device
  std::unique_ptr<MetricsFile> metrics_file_;      // during fit() on rank 0 with training.run_dir
  // The sampler's state before the batch DeviceBatches has staged: what a checkpoint resumes.
  std::optional<data::SamplerState> staged_sampler_state_;
  dist::ProcessGroupPtr control_;  // world size > 1: the stop decision, apart from training
  // training.trace_steps; made by the first train_step.
  std::unique_ptr<StepTrace> step_trace_;
  double peak_flops_ = 0;
  double flops_per_token_ = 0;
};

}  // namespace braid::train
