// PipelineParallel: stage parts, shared embedding copies and steps through the schedule.
#include "braid/parallel/pipeline/pipeline_parallel.h"

#include "braid/autograd/grad_mode.h"
#include "braid/ops/elementwise.h"
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
  activation_shape_ = Shape{rows, seq, config.n_embd};
  runtime_ = std::make_unique<PipelineRuntime>(schedule_, stage_, group_, activation_shape_);
  return part;
}

void PipelineParallel::setup(nn::Module& model, optim::Optimizer& optimizer,
                             const dist::ParallelGrid& grid) {
  const auto* gpt = dynamic_cast<const nn::Gpt*>(&model);
  BRAID_CHECK(gpt != nullptr, "pipeline parallelism splits a GPT (nn::Gpt)");
  BRAID_CHECK(runtime_ != nullptr, "model_part() places the stage; call it before setup()");
  const std::vector<Tensor> params = model.parameters();
  device_ = params.empty() ? Device::cpu() : params.front().device();
  if (!device_.is_cpu()) {
    group_ = grid.group_for("pp", device_);  // throws naming the device when the grid has none
    runtime_ =
        std::make_unique<PipelineRuntime>(schedule_, stage_, group_, activation_shape_, device_);
  }
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

Tensor PipelineParallel::mean_over_stages(Tensor loss_sum) const {
  group_->all_reduce(loss_sum, dist::ReduceOp::sum)->wait();
  scale_(loss_sum, 1.0f / static_cast<float>(schedule_.shape.microbatches));
  return loss_sum;
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
  const StepResult r = runtime().train_step(c, 1.0f / static_cast<float>(micro));
  if (!device_.is_cpu()) return {0.0, batch.inputs.numel(), mean_over_stages(r.device_loss_sum)};
  return {mean_over_stages(r.loss_sum), batch.inputs.numel()};
}

double PipelineParallel::eval_loss(const nn::Gpt& model, const data::Batch& batch) {
  const StepResult r = runtime().forward_only(compute(model, batch));
  if (!device_.is_cpu()) return mean_over_stages(r.device_loss_sum).item();  // the one read
  return mean_over_stages(r.loss_sum);
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
                                 Shape{1, seq, model.config().n_embd}, device_);
  std::vector<float> logits;
  StageCompute c;
  c.forward = [&](int chunk, int, const Tensor& input) {
    const int k = shape.virtual_stage(stage_, chunk);
    Tensor x = model.forward_chunk(chunk, k == 0 ? model.embed(ids) : input);
    if (k != shape.virtual_stages() - 1) return x;
    logits = model.logits_at(x, static_cast<int64_t>(window.size()) - 1);
    // The runtime expects a loss from the last stage.
    return Tensor::full({}, 0.0f, DType::f32, device_);
  };
  window_runtime.forward_only(c);
  const int last = shape.stage_of(shape.virtual_stages() - 1);
  if (!device_.is_cpu()) {
    // The last stage read its logits (logits_at); the others read the broadcast ones once.
    const int64_t vocab = model.config().vocab_size;
    Tensor shared = stage_ == last ? Tensor::from_vector(logits, {vocab}, device_)
                                   : Tensor::empty({vocab}, DType::f32, device_);
    group_->broadcast(shared, last)->wait();
    return stage_ == last ? logits : shared.to_vector();
  }
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
