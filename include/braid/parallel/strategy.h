// parallel::Strategy: the seam through which a parallel scheme plugs into training.
//
// The Trainer runs every layout through these hooks and never branches on a strategy: a
// strategy implements the ones it needs. Data parallelism and ZeRO-1 are strategies, the
// pipeline runtime is one (wrapping the data-parallel one, strategy_wrapper.h), and so can be
// anything registered from outside the library with register_strategy (examples/custom_strategy
// shows two: one that changes the update, one that changes the step loop).
//
//   model_part(config, grid)             once, before the model is built: what this rank holds
//   setup(model, optimizer, grid)        once, after the model is initialised
//   forward_backward(model, batches)     the step: forward + backward of its micro-batches,
//                                        calling begin_backward before each backward
//     begin_backward(last_micro_step)    before each micro-batch's backward
//     on_grad_ready(param)               from the autograd hook, per parameter per backward
//   finish_backward()                    after the step's backwards (wait for communication)
//   clip(max_norm)                       the global gradient norm and clip coefficient
//   step(lr, grad_scale)                 the optimizer update (ZeRO-1 owns it)
//   reduce_metric(value)                 a per-rank scalar made global (loss for logging)
//   eval_loss(model, batch)              one validation batch's loss (forward only)
//   generate(model, prompt, options)     sampling
//
// Collective ordering: every rank of the world calls model_part, setup, forward_backward,
// finish_backward, clip, step, reduce_metric and eval_loss in the same order, so the
// collectives a strategy issues from them (over any of the grid's groups) line up. generate is
// called by the ranks of the first model replica only (Trainer::samples_here).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "braid/data/batch.h"
#include "braid/dist/parallel_grid.h"
#include "braid/nn/gpt.h"
#include "braid/nn/module.h"
#include "braid/optim/clip.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/owned_state.h"
#include "braid/optim/ready_grad_squares.h"

namespace braid::parallel {

// Free-form options from the config (`parallel { strategy_options { key: value } }` or
// --set); each strategy reads the keys it knows and rejects unknown ones.
using StrategyOptions = std::map<std::string, std::string>;

// A parameter several ranks hold as copies that must stay equal (the tied embedding on the
// first and last pipeline stage): after the backward, its gradients are summed over `group`,
// and only the copy marked `counted` enters the global gradient norm.
struct SharedParameter {
  Tensor param;
  dist::ProcessGroupPtr group;
  bool counted = true;
};

// The entry of `shared` holding `param`, or null.
const SharedParameter* find_shared(const std::vector<SharedParameter>& shared, const Tensor& param);

// One optimizer step's data, as the Trainer hands it to Strategy::forward_backward.
struct StepBatches {
  // This rank's next batch (training.batch_size sequences); each call consumes one.
  std::function<data::Batch()> next;
  // Batches the step accumulates (training.grad_accum_steps; 1 under a pipeline, which cuts its
  // one batch into parallel.micro_batches).
  int accumulate = 1;
  // The step's index, counted from 0 over the whole run (resumed runs continue the count).
  int64_t step = 0;
};

// What one step's forward and backward report to the Trainer.
struct StepLoss {
  double loss = 0;     // this rank's mean loss of the step, before reduce_metric
  int64_t tokens = 0;  // input tokens this rank consumed
  // A model on a device: the mean loss there (a scalar), not read back; `loss` is then 0.
  Tensor device_loss{};
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;

  // Before the model is built: the part of the GPT this rank builds and holds (its blocks,
  // embeddings, head). Called once, before setup. Default: the whole model. A pipeline places
  // its stage here.
  virtual nn::GptStagePart model_part(const nn::GptConfig& config, const dist::ParallelGrid& grid);
  // The parameters this rank holds as copies another rank holds too; called before setup by
  // the strategy that split the model (a pipeline, for the strategy it wraps).
  virtual void share_parameters(std::vector<SharedParameter> shared) {
    shared_ = std::move(shared);
  }
  // What share_parameters gave (the Trainer leaves the copies not counted out of checkpoints).
  virtual const std::vector<SharedParameter>& shared_parameters() const { return shared_; }

  virtual void setup(nn::Module& model, optim::Optimizer& optimizer,
                     const dist::ParallelGrid& grid);

  // One optimizer step's forward and backward, after the Trainer zeroed the gradients and
  // before it calls finish_backward: takes the step's batches from `batches` and leaves their
  // gradients in the parameters (or wherever the strategy's hooks put them), calling
  // begin_backward(last) before every backward, `last` true for this rank's final one.
  // Default: gradient accumulation over `batches.accumulate` whole-model micro-batches, each
  // loss back-propagated times 1 / accumulate (the step's gradient is their mean). A strategy
  // that changes the step loop overrides this (examples/custom_strategy/token_mean.h).
  virtual StepLoss forward_backward(const nn::Gpt& model, const StepBatches& batches);
  // The mean loss of one validation batch, forward only, before reduce_metric; the Trainer
  // disables gradients around it. Default: the whole model's loss.
  virtual double eval_loss(const nn::Gpt& model, const data::Batch& batch);
  // Continues `prompt` (no history recorded). Default: the whole model's generate.
  virtual std::vector<int32_t> generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                        const nn::SampleOptions& options);

  virtual void begin_backward(bool last_micro_step) {}
  virtual void on_grad_ready(Tensor& param) {}
  // Default: sums the shared parameters' gradients (sum_shared_gradients).
  virtual void finish_backward() { sum_shared_gradients(); }
  // Default: the norm of the model's gradients over the tensor- and pipeline-parallel groups
  // (global when the gradients are already reduced over data parallelism).
  virtual optim::ClipResult clip(float max_norm);
  // Default: optimizer.step(lr, grad_scale).
  virtual void step(float lr, float grad_scale);
  // Default: the value itself (single process).
  virtual double reduce_metric(double value) { return value; }
  // Extra state a checkpoint must hold to resume this strategy exactly.
  virtual std::map<std::string, Tensor> state() const { return {}; }
  // The parameters and optimizer state this rank holds and updates, as views of the live
  // tensors: what its checkpoint shard holds (replicated state from data-parallel rank 0
  // only), what a load fills in place and what an overlapped checkpoint replays. Default:
  // every parameter whole with the optimizer's own state, replicated over data parallelism.
  virtual optim::OwnedState owned_state(optim::Optimizer& optimizer);
  // After a load filled owned_state() and the optimizer's step counters: take what the
  // strategy keeps itself (ZeRO-1: the step count). Default: nothing.
  virtual void after_load(const optim::Optimizer& optimizer) {}
  // A strategy that keeps the optimizer state itself (ZeRO-1): gathers it into `optimizer`'s
  // own per-parameter state (whole, on every rank), to inspect it. Collective over the
  // strategy's groups. Default: nothing (the optimizer's state is the live one).
  virtual void gather_optimizer_state(optim::Optimizer& optimizer) {}

 protected:
  // All-reduces (sum) every shared parameter's gradient over its group, in share order.
  void sum_shared_gradients();
  bool is_shared(const Tensor& param) const;

  std::vector<SharedParameter> shared_;
  // When set (SingleProcess), clip() takes the gradient squares it recorded instead of reading
  // every gradient again; the strategy calls its begin_backward before each backward.
  std::unique_ptr<optim::ReadyGradSquares> ready_squares_;
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  const dist::ParallelGrid* grid_ = nullptr;
};

// Squared gradient norms of one rank, split by how tensor parallelism lays parameters out.
struct GradSquares {
  double sharded = 0;     // parameters split over tp: each rank holds a different piece
  double replicated = 0;  // parameters every tp rank holds whole (and identical)
};
// The global gradient norm: sharded squares summed over the tp group, replicated ones once,
// then every pipeline stage's total summed over pp. Collective over the grid's tp and pp
// groups when they have more than one rank.
double global_grad_norm(const GradSquares& squares, const dist::ParallelGrid& grid);
// This rank's squares of the model's gradients, classified by the model's shard specs;
// shared copies not marked counted are left out. Squares `ready` recorded are taken as they
// are, except for shared copies (summed after the backward, so their records are stale).
GradSquares grad_squares(const nn::Module& model, const std::vector<SharedParameter>& shared = {},
                         const optim::ReadyGradSquares* ready = nullptr);
// global_grad_norm on a device, nothing read back: `squares` (f32[2] on the grid's device) holds
// this rank's {sharded, replicated} squares; the sharded one is summed over the tp axis' device
// communicator, then a kernel makes ClipResult::device = {norm, scale} (clip_for_norm's rule).
// Collective over the grid's tp group; a grid with pp > 1 is refused (no device pipeline yet).
optim::ClipResult clip_from_device_squares(Tensor squares, const dist::ParallelGrid& grid,
                                           float max_norm);

using StrategyFactory = std::function<std::unique_ptr<Strategy>(const StrategyOptions& options)>;

// Makes `name` available to make_strategy (and to configs). Registering a name twice throws.
void register_strategy(const std::string& name, StrategyFactory factory);
// The strategy registered as `name`; an unknown name lists the registered ones.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyOptions& options);
std::vector<std::string> registered_strategies();

// Reads an option with a default, and checks that every key given is one the strategy knows.
class OptionReader {
 public:
  OptionReader(const StrategyOptions& options, std::string strategy)
      : options_(options), strategy_(std::move(strategy)) {}
  double number(const std::string& key, double fallback);
  bool flag(const std::string& key, bool fallback);
  void finish() const;  // throws on keys nobody asked for

 private:
  const StrategyOptions& options_;
  std::string strategy_;
  std::vector<std::string> used_;
};

}  // namespace braid::parallel
