// The Trainer loop: the strategy's step, clipping, schedule, non-finite handling, validation,
// logs. Every layout runs the same path; what differs lives in the strategy.
#include "braid/train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "braid/autograd/grad_mode.h"
#include "braid/ckpt/gpt2_weights.h"
#include "braid/core/allocator.h"
#include "braid/core/logging.h"
#include "braid/core/trace.h"
#include "braid/data/gpt2_tokenizer.h"
#include "braid/dist/solo_process_group.h"
#include "braid/ops/host_checked.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/parallel/tensor_parallel.h"
#include "braid/train/device_placement.h"
#include "braid/train/memory_plan.h"
#include "braid/train/peak_flops.h"
#include "braid/train/stop_signals.h"
#include "metrics_file.h"
#include "training_strategy.h"

namespace braid::train {

nn::GptConfig gpt_config(const TrainConfig& config) {
  const auto& m = config.model();
  nn::GptConfig g;
  g.vocab_size = m.vocab_size();
  g.padded_vocab_multiple = m.padded_vocab_multiple();
  g.n_layer = m.n_layer();
  g.n_head = m.n_head();
  g.n_embd = m.n_embd();
  g.block_size = m.block_size();
  g.recompute = m.recompute();
  g.tie_embeddings = m.tie_embeddings();
  return g;
}

std::unique_ptr<data::Tokenizer> load_tokenizer(const TrainConfig& config) {
  const std::string& name = config.data().tokenizer();
  if (name == "byte") return std::make_unique<data::ByteTokenizer>();
  BRAID_CHECK(name == "gpt2", "data.tokenizer '{}' is not known (expected gpt2 or byte)", name);
  std::string dir = config.data().vocab_dir();
  if (dir.empty()) {
    // Unset: where scripts/fetch_gpt2_vocab.sh puts the files.
    const char* data_dir = std::getenv("BRAID_DATA_DIR");
    dir = std::string(data_dir ? data_dir : "data") + "/gpt2";
  }
  return std::make_unique<data::Gpt2Tokenizer>(data::Gpt2Tokenizer::load_dir(dir));
}

namespace {

// Elements of the whole single-process model: this stage's global parameter sizes (tensor
// shards count whole), minus the copies another stage holds (`elsewhere`), summed over
// pipeline stages.
int64_t model_parameters(const nn::Gpt& model, const std::set<std::string>& elsewhere,
                         const dist::ParallelGrid& grid) {
  double n = static_cast<double>(model.num_global_parameters());
  for (const auto& [name, spec] : model.shard_specs())
    if (elsewhere.count(name)) n -= static_cast<double>(shape_numel(spec.global_shape));
  if (grid.size("pp") > 1) {
    Tensor total = Tensor::full({1}, static_cast<float>(n));
    grid.group("pp")->all_reduce(total, dist::ReduceOp::sum)->wait();
    n = total.item();
  }
  return static_cast<int64_t>(n + 0.5);
}

// Whether step `done` (steps completed) gets a line in the run's metrics: the logged steps, the
// last, and the validated ones (so each validation loss has its line).
bool metrics_line_due(const proto::TrainingConfig& tr, int64_t done) {
  return tr.log_every() <= 1 || done % tr.log_every() == 0 || done == tr.steps() ||
         (tr.val_every() > 0 && done % tr.val_every() == 0);
}

}  // namespace

Trainer::Trainer(TrainConfig config, dist::ProcessGroupPtr world, DeviceGroupsFor device_groups)
    : config_(std::move(config)) {
  validate(config_);
  const auto& tr = config_.training();
  if (tr.threads() > 0) omp_set_num_threads(tr.threads());
  const auto& par = config_.parallel();
  if (!world) world = std::make_shared<dist::SoloProcessGroup>();
  const std::string layout = world_size_problem(config_, world->size());
  BRAID_CHECK(layout.empty(), "invalid config: {}", layout);
  device_ = training_device(tr.device(), [](const char* name) { return std::getenv(name); });
  const std::vector<dist::GridAxis> axes =
      dist::ParallelGrid::default_axes(par.tp(), 1, par.dp(), par.pp());
  if (device_.is_cpu() || world->size() == 1) {
    // One process on a device needs no communicator: its grid is the CPU one, as on the CPU.
    grid_ = std::make_unique<dist::ParallelGrid>(world, axes);
  } else {
    BRAID_CHECK(device_groups,
                "training.device \"{}\" with parallel.tp={} dp={} needs device communicators, and "
                "this Trainer was given none: link braid_nccl (braid_nccl_simt on the emulated "
                "device) and pass dist::nccl_group_factory (dist/nccl_process_group.h) as the "
                "Trainer's device_groups, or train this layout with training.device \"cpu\"",
                tr.device(), par.tp(), par.dp());
    grid_ =
        std::make_unique<dist::ParallelGrid>(world, axes, device_, device_groups(device_.index));
  }
  if (world->size() > 1) {
    set_log_prefix(fmt::format("[{} {}]", world->rank(), grid_->describe()));
    std::vector<int> everyone(world->size());
    for (int r = 0; r < world->size(); ++r) everyone[r] = r;
    control_ = world->split(everyone, "control");
  }

  // Stop before building anything when this rank's memory plan cannot fit (docs/memory.md).
  // Every rank stops together: one stopping alone would leave the others waiting in a collective.
  const std::string memory = start_of_run_memory_problem(
      config_, world->rank(), device_, [](const char* name) { return std::getenv(name); });
  if (control_) {
    Tensor failed = Tensor::full({1}, memory.empty() ? 0.0f : 1.0f);
    control_->all_reduce(failed, dist::ReduceOp::max)->wait();
    BRAID_CHECK(!memory.empty() || failed.item() == 0.0f,
                "another rank cannot fit its memory plan (its error says what it needs and what "
                "is free; set {}=1 to start anyway)",
                kSkipMemoryCheckEnv);
  }
  BRAID_CHECK(memory.empty(), "{}", memory);

  // The strategy decides what of the model this rank builds (a pipeline: its stage's part).
  strategy_ = make_training_strategy(config_);
  const nn::GptConfig model_config = gpt_config(config_);
  // Tensor parallelism communicates activations, so on a device through the tp axis' device
  // communicator.
  nn::TensorParallelPtr tensor_parallel =
      grid_->device().is_cpu() || grid_->size("tp") == 1
          ? parallel::TensorParallelGroup::from_grid(*grid_, par.sequence_parallel())
          : std::make_shared<parallel::TensorParallelGroup>(grid_->group_for("tp", device_),
                                                            par.sequence_parallel());
  model_ = std::make_unique<nn::Gpt>(model_config, std::move(tensor_parallel),
                                     strategy_->model_part(model_config, *grid_));
  model_->init_weights(tr.seed());
  // Pretrained weights replace the random ones, each rank taking its slices, on the host.
  if (!config_.model().init_from().empty())
    ckpt::load_gpt2_weights(config_.model().init_from(), *model_);
  // Initialised on the host as always (the same weights on every device), then moved, before
  // the optimizer and the strategy take their handles and make their state.
  if (!device_.is_cpu()) model_->to(device_);
  const auto& o = config_.optimizer();
  optimizer_ = optim::make_optimizer(
      o.name(),
      optim::decay_groups(model_->named_parameters(), static_cast<float>(o.weight_decay())),
      {static_cast<float>(o.beta1()), static_cast<float>(o.beta2()), static_cast<float>(o.eps())},
      static_cast<float>(o.momentum()));
  schedule_ = {static_cast<float>(o.lr()), static_cast<float>(o.min_lr()), o.warmup_steps(),
               tr.steps(), o.schedule()};
  strategy_->setup(*model_, *optimizer_, *grid_);
  for (const auto& [name, p] : model_->named_parameters()) {
    const parallel::SharedParameter* copy =
        parallel::find_shared(strategy_->shared_parameters(), p);
    if (copy && !copy->counted) not_saved_here_.insert(name);
  }

  data::SamplerConfig sc;
  sc.batch_size = tr.batch_size();
  sc.seq_len = tr.seq_len();
  sc.seed = tr.seed();
  sc.dp_rank = grid_->coord("dp");
  sc.dp_size = grid_->size("dp");
  data::TokenDataset train_set = data::TokenDataset::from_pattern(config_.data().train_pattern());
  train_set.validate_ids(model_->config().vocab_size);
  train_sampler_.emplace(std::move(train_set), sc);
  if (!config_.data().val_pattern().empty()) {
    data::TokenDataset val_set = data::TokenDataset::from_pattern(config_.data().val_pattern());
    val_set.validate_ids(model_->config().vocab_size);
    sc.shuffle = false;
    val_sampler_.emplace(std::move(val_set), sc);
  }
  batch_source_ = [this] { return train_sampler_->next(); };
  if (!device_.is_cpu()) {
    device_batches_ = std::make_unique<DeviceBatches>(device_, model_->config().vocab_size);
    device_metrics_ = std::make_unique<DeviceMetrics>(device_, tr.log_every());
  }

  const auto& ck = config_.checkpoint();
  if (!ck.dir().empty())
    checkpointer_ = std::make_unique<ckpt::Checkpointer>(
        ckpt::CheckpointOptions{ck.dir(), ckpt::mode_from_name(ck.mode()), ck.keep(), ck.window()},
        *grid_);
  // "latest" with nothing saved yet starts fresh: the first run of a restartable job.
  const std::string& resume = config_.proto.resume();
  const bool latest = resume == "latest";
  if (!resume.empty() && (!latest || ckpt::has_committed_checkpoint(ck.dir()))) {
    // Straight into the state the strategy keeps live (under ZeRO-1 this rank's chunks only).
    const optim::OwnedState live = strategy_->owned_state(*optimizer_);
    const ckpt::TrainingState state =
        ckpt::load_checkpoint(latest ? ck.dir() : resume, *model_, *optimizer_, *grid_,
                              {ck.reshard(), ck.fallback()}, &live);
    step_ = state.step;
    train_sampler_->restore(state.sampler);
    strategy_->after_load(*optimizer_);
  }

  // Each rank's own peak; ranks sharing a machine take turns measuring (peak_flops.h).
  const PeakFlops peak = resolve_peak_flops(tr.peak_flops());
  peak_flops_ = peak.flops;
  const int64_t parameters = model_parameters(*model_, not_saved_here_, *grid_);  // collective
  flops_per_token_ = nn::training_flops_per_token(model_->config(), parameters, tr.seq_len());
  if (!is_lead()) return;
  log().info("model: {} layers, {} heads, width {}, vocab {} (padded {}), {:.2f}M parameters",
             model_->config().n_layer, model_->config().n_head, model_->config().n_embd,
             model_->config().vocab_size, model_->padded_vocab(),
             static_cast<double>(parameters) / 1e6);
  log().info("data: {} train tokens; {} threads; peak {:.1f} GFLOP/s per rank ({}); {} x{} ({})",
             train_sampler_->dataset().total_tokens(), omp_get_max_threads(), peak_flops_ / 1e9,
             peak.source, strategy_->name(), world->size(), grid_->describe());
  if (!device_.is_cpu()) log().info("device: {}", device_.str());
}

Trainer::~Trainer() = default;

StepMetrics Trainer::train_step() {
  if (!step_trace_)
    step_trace_ = std::make_unique<StepTrace>(parse_trace_steps(config_.training().trace_steps()),
                                              config_.training().run_dir(), *grid_, control_);
  step_trace_->before_step(step_ + 1);
  StepMetrics m;
  {
    trace::Span span("step");
    if (span.active()) span.name(fmt::format("step {}", step_ + 1)).arg({"step", step_ + 1});
    m = run_step();
  }
  step_trace_->after_step(step_);
  return m;
}

// The phase clocks of this (the training) thread, ms: their change over a step is its phase
// split (trace.h; StepMetrics documents what each covers).
struct Trainer::PhaseClocks {
  double forward = trace::phase_us(trace::Phase::forward) / 1e3;
  double comm_wait = trace::phase_us(trace::Phase::comm_wait) / 1e3;
};

StepMetrics Trainer::run_step() {
  const auto& tr = config_.training();
  const auto t0 = std::chrono::steady_clock::now();
  const double optimizer_us = trace::phase_us(trace::Phase::optimizer);
  const double checkpoint_us = trace::phase_us(trace::Phase::checkpoint);
  reset_host_peak();
  optimizer_->zero_grad();
  const auto pass_start = std::chrono::steady_clock::now();
  const PhaseClocks before_pass;
  parallel::StepLoss pass;
  {
    trace::Span span("phase", "forward_backward");
    pass = strategy_->forward_backward(*model_, {step_batches(), tr.grad_accum_steps(), step_});
    strategy_->finish_backward();
  }
  const PhaseClocks after_pass;
  StepMetrics m;
  m.step = step_;
  m.lr = schedule_.at(step_);
  // Backward: the rest of the passes' wall time (autograd, the strategy's work between the
  // micro-batches), their communication waits excluded like the forward's.
  m.forward_ms = after_pass.forward - before_pass.forward;
  m.backward_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - pass_start)
          .count() -
      m.forward_ms - (after_pass.comm_wait - before_pass.comm_wait);
  std::optional<trace::PhaseScope> optimizer_phase(std::in_place, trace::Phase::optimizer);
  std::optional<trace::Span> optimizer_span(std::in_place, "optimizer", "clip");
  const optim::ClipResult clip =
      strategy_->clip(static_cast<float>(config_.optimizer().grad_clip()));
  optimizer_span.reset();
  const bool window = checkpointer_ && checkpointer_->window_open();
  // The update is a span of its own in the optimizer phase; the checkpoint's calls around it
  // leave that phase for the checkpoint's (its stall).
  auto update = [&](auto&& apply) {
    trace::Span span("optimizer", "optimizer step");
    apply();
  };
  auto checkpoint_call = [&](const char* name, auto&& call) {
    const bool in_optimizer = optimizer_phase.has_value();
    optimizer_phase.reset();
    {
      const trace::PhaseScope stall(trace::Phase::checkpoint);
      trace::Span span("checkpoint", name);
      call();
    }
    if (in_optimizer) optimizer_phase.emplace(trace::Phase::optimizer);
  };
  if (device_metrics_) {
    // The loss, norm, scale and skip flag stay on the device: the update reads them there, an
    // overlapped checkpoint copies them with the step's gradients, and the host learns them at
    // the next readback (absorb), so m.loss and m.grad_norm stay NaN here.
    const Tensor record = device_verdict(pass, clip);
    if (window)
      checkpoint_call("checkpoint before update", [&] {
        checkpointer_->before_update(strategy_->owned_state(*optimizer_), m.lr,
                                     record.narrow(0, ops::kRecordScale, 1),
                                     record.narrow(0, ops::kRecordSkip, 1));
      });
    // A non-finite step is skipped on the device.
    update([&] { strategy_->step(m.lr, 1.0f); });
  } else {
    host_verdict(pass, clip, m);
    // An overlapped checkpoint records exactly what this update uses.
    if (window)
      checkpoint_call("checkpoint before update", [&] {
        checkpointer_->before_update(strategy_->owned_state(*optimizer_), m.lr, clip.scale,
                                     m.skipped);
      });
    if (!m.skipped) update([&] { strategy_->step(m.lr, clip.scale); });
  }
  optimizer_phase.reset();
  ++step_;
  if (window)
    checkpoint_call("checkpoint after update", [&] {
      checkpointer_->after_update(strategy_->owned_state(*optimizer_),
                                  [this] { return training_state(); });
    });
  m.optimizer_ms = (trace::phase_us(trace::Phase::optimizer) - optimizer_us) / 1e3;
  m.checkpoint_stall_ms = (trace::phase_us(trace::Phase::checkpoint) - checkpoint_us) / 1e3;
  m.comm_wait_ms = PhaseClocks().comm_wait - before_pass.comm_wait;
  m.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // tokens_per_s counts every data-parallel rank; so does the peak (each rank measured its own).
  // On a device the host's step time is the device's: batch staging keeps the host within two
  // steps of it.
  m.tokens_per_s = static_cast<double>(pass.tokens * grid_->size("dp")) / (m.step_ms / 1e3);
  const double job_peak = peak_flops_ * grid_->world()->size();
  m.mfu = job_peak > 0 ? m.tokens_per_s * flops_per_token_ / job_peak : 0;
  // Said once, at the first step above the peak.
  if (m.mfu > 1 && is_lead() &&
      std::none_of(history_.begin(), history_.end(),
                   [](const StepMetrics& h) { return h.mfu > 1; }))
    log().warn("{}",
               peak_exceeded_warning(m.mfu, peak_flops_, config_.training().peak_flops() > 0));
  m.peak_bytes = host_memory_stats().peak_bytes;
  if (!device_.is_cpu()) {
    const DeviceMemoryStats memory = device_memory_stats(device_);
    m.on_device = true;
    m.device_allocated_bytes = memory.allocated_bytes;
    m.device_reserved_bytes = memory.reserved_bytes;
    m.device_peak_bytes = memory.peak_allocated_bytes;
    m.device_mallocs = memory.device_mallocs;
  }
  history_.push_back(m);
  return m;
}

std::function<data::Batch()> Trainer::step_batches() {
  if (!device_batches_) return batch_source_;
  // Each batch comes from the one staged ahead; the sampler's state before the newly staged one
  // is what a checkpoint of this step resumes from.
  return [this] {
    return device_batches_->next(batch_source_, [this] {
      if (train_sampler_) staged_sampler_state_ = train_sampler_->state();
    });
  };
}

void Trainer::host_verdict(const parallel::StepLoss& pass, const optim::ClipResult& clip,
                           StepMetrics& m) {
  m.loss = static_cast<float>(strategy_->reduce_metric(pass.loss));
  m.grad_norm = clip.norm;
  if (std::isfinite(m.loss) && std::isfinite(clip.norm)) return;
  BRAID_CHECK(config_.training().skip_nonfinite_steps(),
              "loss {} / gradient norm {} is not finite at step {}; lower optimizer.lr, or set "
              "training.skip_nonfinite_steps: true to skip such steps",
              m.loss, clip.norm, step_ + 1);
  m.skipped = true;
  log().warn("step {}: non-finite loss {} or gradient norm {}; update skipped", step_ + 1, m.loss,
             clip.norm);
}

Tensor Trainer::device_verdict(const parallel::StepLoss& pass, const optim::ClipResult& clip) {
  BRAID_CHECK(pass.device_loss.defined(),
              "strategy '{}' returned no device loss for a model on {} (StepLoss::device_loss)",
              strategy_->name(), device_.str());
  BRAID_CHECK(clip.device.defined(), "strategy '{}' clipped the gradients on {} on the host",
              strategy_->name(), device_.str());
  Tensor loss = pass.device_loss;
  if (grid_->size("dp") > 1) {
    // Each data-parallel rank's loss is of its own rows: the step's is their mean, as the host
    // path's reduce_metric takes it (and on the device, so nothing is read back).
    loss = loss.clone();
    grid_->group_for("dp", device_)->all_reduce(loss, dist::ReduceOp::avg)->wait();
  }
  Tensor record = device_metrics_->record_for(step_);
  ops::kernel<ops::StepVerdictKernel>(device_)(loss, clip.device, step_, record,
                                               device_metrics_->state());
  optimizer_->set_device_step(record, device_metrics_->state());
  return record;
}

void Trainer::absorb(const std::vector<DeviceReadback>& readbacks, bool log_steps) {
  const auto& tr = config_.training();
  const int64_t total = tr.steps();
  for (const DeviceReadback& rb : readbacks) {
    optimizer_->count_device_skips(rb.skipped_total);
    const StepRecord* first_bad = nullptr;
    for (const StepRecord& r : rb.steps) {
      if (r.skipped && !first_bad) first_bad = &r;
      const int64_t first = history_.empty() ? 0 : history_.front().step;
      BRAID_CHECK(r.step >= first && r.step - first < static_cast<int64_t>(history_.size()),
                  "device metrics for step {} have no entry in the history", r.step + 1);
      StepMetrics& h = history_[r.step - first];
      h.loss = r.loss;
      h.grad_norm = r.norm;
      h.skipped = r.skipped;
      if (r.skipped && tr.skip_nonfinite_steps() && is_lead())
        log().warn("step {}: non-finite loss {} or gradient norm {}; update skipped", r.step + 1,
                   r.loss, r.norm);
      const int64_t done = r.step + 1;
      if (log_steps && is_lead() &&
          (tr.log_every() <= 1 || done % tr.log_every() == 0 || done == total))
        log().info("{}", format_step(h, total));
      if (metrics_file_ && metrics_line_due(tr, done)) metrics_file_->add_step(h);
    }
    if (rb.first_nonfinite > 0 && !tr.skip_nonfinite_steps()) {
      const std::string values =
          first_bad && first_bad->step + 1 == rb.first_nonfinite
              ? fmt::format("loss {} / gradient norm {}", first_bad->loss, first_bad->norm)
              : std::string("loss / gradient norm");
      BRAID_FAIL(
          "{} is not finite at step {}; lower optimizer.lr, or set "
          "training.skip_nonfinite_steps: true to skip such steps (on {} the check reads the "
          "step's values back with the metrics, so it stops {} steps later; that update and the "
          "ones after it were not applied)",
          values, rb.first_nonfinite, device_.str(), step_ - rb.first_nonfinite);
    }
  }
}

void Trainer::drain_device_metrics(bool log_steps) {
  if (!device_metrics_) return;
  device_metrics_->readback();
  absorb(device_metrics_->collect(/*wait=*/true), log_steps);
}

void Trainer::sync_device_metrics() {
  drain_device_metrics(false);
}

float Trainer::evaluate() {
  BRAID_CHECK(val_sampler_.has_value(), "evaluate() needs data.val_pattern in the config");
  autograd::NoGradGuard no_grad;
  val_sampler_->reset();
  const int64_t batches =
      std::min<int64_t>(config_.training().val_steps(), val_sampler_->batches_per_epoch());
  double total = 0;
  for (int64_t i = 0; i < batches; ++i) {
    data::Batch batch = val_sampler_->next();
    if (!device_.is_cpu()) {
      check_host_batch(batch, model_->config().vocab_size);
      data::Batch on_device{batch.inputs.contiguous().to(device_),
                            batch.targets.contiguous().to(device_)};
      ops::mark_host_checked(on_device.inputs, ops::host_check(batch.inputs.contiguous()));
      ops::mark_host_checked(on_device.targets, ops::host_check(batch.targets.contiguous()));
      batch = std::move(on_device);
    }
    total += strategy_->eval_loss(*model_, batch);
  }
  return static_cast<float>(
      strategy_->reduce_metric(total / static_cast<double>(std::max<int64_t>(batches, 1))));
}

ckpt::TrainingState Trainer::training_state() const {
  ckpt::TrainingState state;
  state.step = step_;
  // A batch staged for the device has left the sampler but is not trained on yet.
  state.sampler = device_batches_ && device_batches_->has_staged() && staged_sampler_state_
                      ? *staged_sampler_state_
                      : train_sampler_->state();
  state.config = to_text(config_);
  return state;
}

void Trainer::save_checkpoint(bool now) {
  BRAID_CHECK(checkpointer_, "save_checkpoint needs checkpoint.dir in the config");
  // A step that was not finite stops the run here, before it could be saved.
  sync_device_metrics();
  // Each rank writes what it owns: under ZeRO-1 its chunks, nothing gathered.
  const optim::OwnedState owned = strategy_->owned_state(*optimizer_);
  if (now) {
    checkpointer_->save_now(*model_, *optimizer_, owned, training_state(), not_saved_here_);
  } else {
    checkpointer_->save(*model_, *optimizer_, owned, training_state(), not_saved_here_);
  }
}

void Trainer::prepare_checkpoint() {
  if (!checkpointer_) return;
  checkpointer_->prepare(*model_, *optimizer_, strategy_->owned_state(*optimizer_),
                         not_saved_here_);
}

void Trainer::wait_for_checkpoint() {
  if (checkpointer_) checkpointer_->wait();
}

bool Trainer::samples_here() const {
  for (const auto& axis : grid_->axes())
    if (axis.name != "tp" && axis.name != "pp" && grid_->coord(axis.name) != 0) return false;
  return true;
}

std::string Trainer::sample(const std::string& prompt) {
  if (!tokenizer_) tokenizer_ = load_tokenizer(config_);
  const auto& s = config_.sample();
  nn::SampleOptions options;
  options.max_new_tokens = s.tokens();
  options.temperature = static_cast<float>(s.temperature());
  options.top_k = s.top_k();
  options.seed = config_.training().seed();
  std::vector<int32_t> ids = tokenizer_->encode(prompt.empty() ? "\n" : prompt);
  return tokenizer_->decode(strategy_->generate(*model_, std::move(ids), options));
}

int Trainer::stop_requested() {
  int signal = StopSignals::received();
  if (control_) {
    Tensor t = Tensor::full({1}, static_cast<float>(signal));
    control_->all_reduce(t, dist::ReduceOp::max)->wait();
    signal = static_cast<int>(t.item());
  }
  return signal;
}

void Trainer::fit() {
  const StopSignals signals;  // SIGTERM/SIGINT/SIGUSR1: checkpoint and stop after a step
  stopped_by_ = 0;
  const auto& tr = config_.training();
  const int64_t total = tr.steps();
  ProgressBar bar(is_lead() ? total : 0);
  if (is_lead() && !tr.run_dir().empty())
    metrics_file_ = std::make_unique<MetricsFile>(tr.run_dir(), step_, [this](int64_t s) {
      const auto& t = config_.training();
      return val_sampler_.has_value() &&
             ((t.val_every() > 0 && s % t.val_every() == 0) || s == t.steps());
    });
  auto close_metrics = [&] {
    if (metrics_file_) metrics_file_->close();
    metrics_file_.reset();
  };
  auto validate_now = [&] {
    if (!val_sampler_) return;
    const float v = evaluate();
    val_history_.emplace_back(step_, v);
    if (metrics_file_) metrics_file_->add_val(step_, v);
    if (bar.active()) std::printf("\n");
    if (is_lead()) log().info("step {:>5}/{} | val loss {:.4f}", step_, total, v);
  };
  if (tr.val_every() > 0 && step_ == 0) validate_now();
  const int64_t every = config_.checkpoint().every_steps();
  const int64_t first_step = step_;
  while (step_ < total) {
    const StepMetrics m = train_step();
    if (checkpointer_ && every > 0 && step_ % every == 0) save_checkpoint();
    // The optimizer state now exists: the checkpoint buffer can be sized and faulted in.
    if (checkpointer_ && every > 0 && step_ == first_step + 1) prepare_checkpoint();
    bar.update(m);
    if (device_metrics_) {
      // The values come back one logging interval later, so the device never waits for them.
      if (step_ % tr.log_every() == 0 || step_ == total) {
        device_metrics_->readback();
        absorb(device_metrics_->collect(/*wait=*/false), !bar.active());
      }
    } else if (is_lead() && !bar.active() &&
               (tr.log_every() <= 1 || step_ % tr.log_every() == 0 || step_ == total)) {
      log().info("{}", format_step(m, total));
    }
    if (!device_metrics_ && metrics_file_ && metrics_line_due(tr, step_))
      metrics_file_->add_step(history_.back());
    if (tr.val_every() > 0 && step_ % tr.val_every() == 0 && step_ != total) validate_now();
    if (samples_here() && config_.sample().every() > 0 && step_ % config_.sample().every() == 0 &&
        step_ != total) {
      const std::string text = sample(config_.sample().prompt());
      if (is_lead()) log().info("sample: {}", text);
    }
    stopped_by_ = stop_requested();
    if (stopped_by_ != 0) break;
  }
  bar.finish();
  drain_device_metrics(/*log=*/true);
  // The final state is saved at once, even when an overlapped window would need more steps.
  if (checkpointer_ && step_ > first_step &&
      (every == 0 || step_ % every != 0 || checkpointer_->window_open()))
    save_checkpoint(/*now=*/true);
  if (stopped_by_ != 0) {
    wait_for_checkpoint();
    if (is_lead())
      log().warn("stopped by {} after step {} of {}: {}", signal_name(stopped_by_), step_, total,
                 checkpointer_ ? fmt::format("checkpoint step {} is committed in {}; run again to "
                                             "resume",
                                             step_, config_.checkpoint().dir())
                               : std::string("nothing saved (no checkpoint.dir)"));
    close_metrics();
    return;
  }
  validate_now();
  close_metrics();
  wait_for_checkpoint();
}

}  // namespace braid::train
