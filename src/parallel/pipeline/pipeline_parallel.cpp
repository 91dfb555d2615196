// PipelineParallel: stage parts, shared embedding copies and steps through the schedule.
#include "braid/parallel/pipeline/pipeline_parallel.h"

#include "braid/autograd/grad_mode.h"
#include "braid/core/logging.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/validate.h"

namespace braid::parallel::pipeline {

namespace {

Schedule validated_schedule(const PipelineOptions& o) {
  const int v = o.virtual_stages;
  const ScheduleShape shape{o.stages, o.micro_batches > 0 ? o.micro_batches : o.stages, v};
  const std::string name =
      o.schedule == "auto" ? (v > 1 ? "interleaved_1f1b" : "1f1b") : o.schedule;
  Schedule schedule = make_schedule(name, shape);
  validate(schedule);
  return schedule;
}

}  // namespace

PipelineParallel::PipelineParallel(PipelineOptions options, std::unique_ptr<Strategy> data_parallel)
    : StrategyWrapper(std::move(data_parallel)),
      options_(std::move(options)),
      schedule_(validated_schedule(options_)) {}

std::string PipelineParallel::name() const {
  return fmt::format("{}+pipeline({})", inner_->name(), schedule_.name);
}

nn::GptStagePart PipelineParallel::model_part(const nn::GptConfig& config,
                                              const dist::ParallelGrid& grid) {
  const ScheduleShape& shape = schedule_.shape;
  BRAID_CHECK(grid.size("pp") == shape.stages, "the pipeline has {} stages, the grid's pp axis {}",
              shape.stages, grid.size("pp"));
  stage_ = grid.coord("pp");
  group_ = grid.group("pp");
  tie_embeddings_ = config.tie_embeddings;
  const auto ranges = split_layers(config.n_layer, shape.virtual_stages(), options_.stage_layers);
  nn::GptStagePart part;
  part.chunks = stage_chunks(ranges, shape, stage_);
  part.embeddings = stage_ == shape.stage_of(0);
  part.head = stage_ == shape.stage_of(shape.virtual_stages() - 1);

  // Activations between stages: one micro-batch of the residual stream (this rank's piece of
  // the sequence under sequence parallelism).
  const int64_t seq = options_.seq_len / (options_.sequence_parallel ? grid.size("tp") : 1);
  const int64_t rows = options_.batch_size / shape.microbatches;
  runtime_ =
      std::make_unique<PipelineRuntime>(schedule_, stage_, group_, Shape{rows, seq, config.n_embd});
  return part;
}

void PipelineParallel::setup(nn::Module& model, optim::Optimizer& optimizer,
                             const dist::ParallelGrid& grid) {
  const auto* gpt = dynamic_cast<const nn::Gpt*>(&model);
  BRAID_CHECK(gpt != nullptr, "pipeline parallelism splits a GPT (nn::Gpt)");
  BRAID_CHECK(runtime_ != nullptr, "model_part() places the stage; call it before setup()");
  std::vector<SharedParameter> shared;
  if (tie_embeddings_) {
    const int last = grid.size("pp") - 1;
    // Collective over pp; the stages in between get no group and share nothing.
    dist::ProcessGroupPtr ends = group_->split({0, last}, "embedding");
    if (ends) shared.push_back({gpt->wte->weight, ends, stage_ == 0});
  }
  inner_->share_parameters(std::move(shared));
  StrategyWrapper::setup(model, optimizer, grid);
}

PipelineRuntime& PipelineParallel::runtime() {
  BRAID_CHECK(runtime_ != nullptr, "model_part() places the stage; call it before stepping");
  return *runtime_;
}

StageCompute PipelineParallel::compute(const nn::Gpt& model, const data::Batch& batch) const {
  const ScheduleShape& shape = schedule_.shape;
  const int64_t rows = batch.inputs.size(0) / shape.microbatches;
  StageCompute c;
  c.forward = [&model, &batch, shape, rows, stage = stage_](int chunk, int mb,
                                                            const Tensor& input) {
    const int k = shape.virtual_stage(stage, chunk);
    Tensor x = k == 0 ? model.embed(batch.inputs.narrow(0, mb * rows, rows)) : input;
    x = model.forward_chunk(chunk, x);
    if (k == shape.virtual_stages() - 1)
      return model.head_loss(x, batch.targets.narrow(0, mb * rows, rows));
    return x;
  };
  return c;
}

double PipelineParallel::mean_over_stages(double loss_sum) const {
  // Only the last stage computed losses: the sum over the pp group brings them to every stage.
  Tensor total = Tensor::full({1}, static_cast<float>(loss_sum));
  group_->all_reduce(total, dist::ReduceOp::sum)->wait();
  return static_cast<double>(total.item()) / schedule_.shape.microbatches;
}

StepLoss PipelineParallel::forward_backward(const nn::Gpt& model, const StepBatches& batches) {
  BRAID_CHECK(batches.accumulate == 1,
              "a pipeline accumulates over its {} micro-batches; a step of {} batches would need "
              "training.grad_accum_steps = 1",
              schedule_.shape.microbatches, batches.accumulate);
  const data::Batch batch = batches.next();
  const int micro = schedule_.shape.microbatches;
  BRAID_CHECK(batch.inputs.size(0) % micro == 0,
              "a batch of {} sequences does not split into {} micro-batches", batch.inputs.size(0),
              micro);
  StageCompute c = compute(model, batch);
  c.before_backward = [this](bool last) { begin_backward(last); };
  const bool trace = batches.step == 1 && !options_.trace_path.empty();
  if (trace) group_->barrier()->wait();  // a common time origin for all stages
  const StepResult r = runtime().train_step(c, 1.0f / static_cast<float>(micro), trace);
  if (trace) {
    const std::vector<TraceEvent> events = gather_events(r.events, *group_);
    if (grid_->world()->rank() == 0) {
      write_chrome_trace(options_.trace_path, events, schedule_.name);
      log().info("pipeline trace of {} written to {}", schedule_.name, options_.trace_path);
    }
  }
  return {mean_over_stages(r.loss_sum), batch.inputs.numel()};
}

double PipelineParallel::eval_loss(const nn::Gpt& model, const data::Batch& batch) {
  return mean_over_stages(runtime().forward_only(compute(model, batch)));
}

std::vector<float> PipelineParallel::last_logits(const nn::Gpt& model,
                                                 const std::vector<int32_t>& window) {
  // One micro-batch of one window through every virtual stage (GPipe is valid for one
  // micro-batch at any chunk count); the last stage broadcasts the logits to every stage.
  const ScheduleShape& trained = schedule_.shape;
  const ScheduleShape shape{trained.stages, 1, trained.chunks};
  const Tensor ids = model.window_ids(window);
  const int64_t seq = ids.size(1) / (options_.sequence_parallel ? grid_->size("tp") : 1);
  PipelineRuntime window_runtime(make_schedule("gpipe", shape), stage_, group_,
                                 Shape{1, seq, model.config().n_embd});
  std::vector<float> logits;
  StageCompute c;
  c.forward = [&](int chunk, int, const Tensor& input) {
    const int k = shape.virtual_stage(stage_, chunk);
    Tensor x = model.forward_chunk(chunk, k == 0 ? model.embed(ids) : input);
    if (k != shape.virtual_stages() - 1) return x;
    logits = model.logits_at(x, static_cast<int64_t>(window.size()) - 1);
    return Tensor::full({}, 0.0f);  // the runtime expects a loss from the last stage
  };
  window_runtime.forward_only(c);
  const int last = shape.stage_of(shape.virtual_stages() - 1);
  Tensor shared = stage_ == last
                      ? Tensor::from_vector(logits, {static_cast<int64_t>(logits.size())})
                      : Tensor::empty({model.config().vocab_size});
  group_->broadcast(shared, last)->wait();
  return shared.to_vector();
}

std::vector<int32_t> PipelineParallel::generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                                const nn::SampleOptions& options) {
  runtime();  // throws unless model_part placed the stage
  autograd::NoGradGuard no_grad;
  return nn::sample_tokens(
      std::move(prompt), options, model.config().vocab_size, model.generation_window(),
      [&](const std::vector<int32_t>& window) { return last_logits(model, window); });
}

}  // namespace braid::parallel::pipeline
