// PipelineDriver: stage parts, shared embedding copies and pipeline steps for the Trainer.
#include "pipeline_driver.h"

#include "braid/autograd/grad_mode.h"
#include "braid/core/logging.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/validate.h"

namespace braid::train {

namespace pl = parallel::pipeline;

PipelineDriver::PipelineDriver(const TrainConfig& config, const dist::ParallelGrid& grid)
    : grid_(grid),
      stage_(grid.coord("pp")),
      tie_embeddings_(config.model().tie_embeddings()),
      sequence_parallel_(config.parallel().sequence_parallel()) {
  const auto& par = config.parallel();
  const int v = par.virtual_stages();
  const pl::ScheduleShape shape{par.pp(), par.micro_batches() > 0 ? par.micro_batches() : par.pp(),
                                v};
  const std::string name =
      par.schedule() == "auto" ? (v > 1 ? "interleaved_1f1b" : "1f1b") : par.schedule();
  pl::Schedule schedule = pl::make_schedule(name, shape);
  pl::validate(schedule);  // a schedule that could deadlock never runs

  const std::vector<int64_t> counts(par.stage_layers().begin(), par.stage_layers().end());
  const auto ranges = pl::split_layers(config.model().n_layer(), shape.virtual_stages(), counts);
  part_.chunks = pl::stage_chunks(ranges, shape, stage_);
  part_.embeddings = stage_ == shape.stage_of(0);
  part_.head = stage_ == shape.stage_of(shape.virtual_stages() - 1);

  // Activations between stages: one micro-batch of the residual stream (this rank's piece of
  // the sequence under sequence parallelism).
  const int tp = grid.size("tp");
  const int64_t seq = config.training().seq_len() / (par.sequence_parallel() ? tp : 1);
  const int64_t rows = config.training().batch_size() / shape.microbatches;
  runtime_ = std::make_unique<pl::PipelineRuntime>(std::move(schedule), stage_, grid.group("pp"),
                                                   Shape{rows, seq, config.model().n_embd()});
}

std::vector<parallel::SharedParameter> PipelineDriver::shared_parameters(
    const nn::Gpt& model) const {
  if (!tie_embeddings_) return {};
  const int last = grid_.size("pp") - 1;
  dist::ProcessGroupPtr ends = grid_.group("pp")->split({0, last}, "embedding");
  if (!ends) return {};
  return {{model.wte->weight, ends, stage_ == 0}};
}

pl::StageCompute PipelineDriver::compute(const nn::Gpt& model, const data::Batch& batch) const {
  const pl::ScheduleShape& shape = runtime_->schedule().shape;
  const int64_t rows = batch.inputs.size(0) / shape.microbatches;
  pl::StageCompute c;
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

double PipelineDriver::mean_over_stages(double loss_sum) const {
  // Only the last stage computed losses: the sum over the pp group brings them to every stage.
  Tensor total = Tensor::full({1}, static_cast<float>(loss_sum));
  grid_.group("pp")->all_reduce(total, dist::ReduceOp::sum)->wait();
  return static_cast<double>(total.item()) / runtime_->schedule().shape.microbatches;
}

double PipelineDriver::train(const nn::Gpt& model, parallel::Strategy& strategy,
                             const data::Batch& batch, const std::string& trace_path) {
  const int micro = runtime_->schedule().shape.microbatches;
  BRAID_CHECK(batch.inputs.size(0) % micro == 0,
              "a batch of {} sequences does not split into {} micro-batches", batch.inputs.size(0),
              micro);
  pl::StageCompute c = compute(model, batch);
  c.before_backward = [&strategy](bool last) { strategy.begin_backward(last); };
  const bool trace = !trace_path.empty();
  if (trace) grid_.group("pp")->barrier()->wait();  // a common time origin for all stages
  const pl::StepResult r = runtime_->train_step(c, 1.0f / static_cast<float>(micro), trace);
  if (trace) {
    const std::vector<pl::TraceEvent> events = pl::gather_events(r.events, *grid_.group("pp"));
    if (grid_.world()->rank() == 0) {
      pl::write_chrome_trace(trace_path, events, runtime_->schedule().name);
      log().info("pipeline trace of {} written to {}", runtime_->schedule().name, trace_path);
    }
  }
  return mean_over_stages(r.loss_sum);
}

double PipelineDriver::evaluate(const nn::Gpt& model, const data::Batch& batch) {
  return mean_over_stages(runtime_->forward_only(compute(model, batch)));
}

std::vector<float> PipelineDriver::last_logits(const nn::Gpt& model,
                                               const std::vector<int32_t>& window) {
  // One micro-batch of one window through every virtual stage (GPipe is valid for one
  // micro-batch at any chunk count); the last stage broadcasts the logits to every stage.
  const pl::ScheduleShape& trained = runtime_->schedule().shape;
  const pl::ScheduleShape shape{trained.stages, 1, trained.chunks};
  const Tensor ids = model.window_ids(window);
  const int64_t seq = ids.size(1) / (sequence_parallel_ ? grid_.size("tp") : 1);
  pl::PipelineRuntime runtime(pl::make_schedule("gpipe", shape), stage_, grid_.group("pp"),
                              Shape{1, seq, model.config().n_embd});
  std::vector<float> logits;
  pl::StageCompute c;
  c.forward = [&](int chunk, int, const Tensor& input) {
    const int k = shape.virtual_stage(stage_, chunk);
    Tensor x = model.forward_chunk(chunk, k == 0 ? model.embed(ids) : input);
    if (k != shape.virtual_stages() - 1) return x;
    logits = model.logits_at(x, static_cast<int64_t>(window.size()) - 1);
    return Tensor::full({}, 0.0f);  // the runtime expects a loss from the last stage
  };
  runtime.forward_only(c);
  const int last = shape.stage_of(shape.virtual_stages() - 1);
  Tensor shared = stage_ == last
                      ? Tensor::from_vector(logits, {static_cast<int64_t>(logits.size())})
                      : Tensor::empty({model.config().vocab_size});
  grid_.group("pp")->broadcast(shared, last)->wait();
  return shared.to_vector();
}

std::vector<int32_t> PipelineDriver::generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                              const nn::SampleOptions& options) {
  autograd::NoGradGuard no_grad;
  return nn::sample_tokens(
      std::move(prompt), options, model.config().vocab_size, model.generation_window(),
      [&](const std::vector<int32_t>& window) { return last_logits(model, window); });
}

}  // namespace braid::train
