// Checkpointer: collects this rank's tensors, writes its shard file and manifest, and runs the
// commit protocol (synchronously, or on a writer thread after one copy of the state).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <pthread.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <functional>

#include "braid/autograd/grad_mode.h"
#include "braid/ckpt/checkpoint.h"
#include "braid/ckpt/overlapped_window.h"
#include "braid/ckpt/run_lock.h"
#include "braid/core/logging.h"
#include "braid/core/thread_priority.h"
#include "braid/core/trace.h"
#include "checkpoint_dir.h"
#include "fault_injection.h"
#include "format.h"
#include "shard_writer.h"
#include "snapshot_image.h"

namespace braid::ckpt {

namespace {

// Takes the run lock of `dir` on rank 0 of `group` and runs `action` there under it; every rank
// learns how that went, so that all throw together: DirectoryInUse when another run holds the
// folder, and any other failure of rank 0's (a folder it cannot create) is rethrown there and
// named on the others. Collective over `group`; the lock (rank 0's) is returned.
std::shared_ptr<RunLock> lock_on_rank0(const std::string& dir, dist::ProcessGroup& group,
                                       const std::function<void()>& action) {
  enum Outcome { kLocked = 0, kInUse = 1, kFailed = 2 };
  std::shared_ptr<RunLock> lock;
  std::exception_ptr failure;
  int outcome = kLocked;
  if (group.rank() == 0) {
    try {
      lock = RunLock::acquire(dir);
      action();
    } catch (const DirectoryInUse&) {
      failure = std::current_exception();
      outcome = kInUse;
    } catch (const std::exception&) {
      failure = std::current_exception();
      outcome = kFailed;
    }
  }
  Tensor shared = Tensor::full({1}, static_cast<float>(outcome));
  group.broadcast(shared, 0)->wait();
  if (failure) std::rethrow_exception(failure);
  outcome = static_cast<int>(shared.item());
  if (outcome == kInUse)
    throw DirectoryInUse(
        fmt::format("checkpoint dir {} is in use by {}", dir, RunLock::holder(dir)));
  BRAID_CHECK(outcome == kLocked,
              "rank 0 could not open the checkpoint dir {} (its error says why)", dir);
  return lock;
}

int64_t entry_bytes(const std::vector<ShardEntry>& entries) {
  int64_t total = 0;
  for (const ShardEntry& e : entries) total += static_cast<int64_t>(e.values.nbytes());
  return total;
}

}  // namespace

Mode mode_from_name(const std::string& name) {
  if (name == "sync") return Mode::sync;
  if (name == "async") return Mode::async;
  if (name == "overlapped") return Mode::overlapped;
  BRAID_FAIL("checkpoint mode '{}' is not known (expected sync, async or overlapped)", name);
}

// One checkpoint in flight: the copied tensors and everything the manifests record.
struct Checkpointer::Pending {
  TrainingState state;
  std::vector<ShardEntry> entries;  // private copies: training changes the originals
  std::map<std::string, int64_t> param_steps;
  int64_t optimizer_steps = 0;
  Mode mode = Mode::sync;  // how this one was taken (the final save_now of overlapped: async)
  // Overlapped: captured at the request, for the entries written when the window closes.
  std::map<std::string, nn::ShardSpec> specs;
  std::set<std::string> skip;
  // Entries copied off a device whose DMA may still run: the writer waits and checksums them.
  PendingCopies copies;
};

Checkpointer::Checkpointer(CheckpointOptions options, const dist::ParallelGrid& grid)
    : options_(std::move(options)), grid_(grid) {
  BRAID_CHECK(!options_.dir.empty(), "checkpoint.dir is empty; name a folder for checkpoints");
  BRAID_CHECK(options_.keep >= 0, "checkpoint.keep must be >= 0 (0 keeps all), got {}",
              options_.keep);
  std::vector<int> everyone(grid.world()->size());
  for (int r = 0; r < grid.world()->size(); ++r) everyone[r] = r;
  channel_ = grid.world()->split(everyone, "checkpoint");
  lock_ = lock_on_rank0(options_.dir, *channel_, [this] {
    const std::vector<std::string> swept = sweep_uncommitted(options_.dir);
    if (!swept.empty())
      log().info("removed {} uncommitted leftover(s) of an interrupted run from {}: {}",
                 swept.size(), options_.dir, fmt::join(swept, ", "));
  });
}

void remove_checkpoints(const std::string& dir, dist::ProcessGroup& group) {
  lock_on_rank0(dir, group, [&] { remove_all_checkpoints(dir); });
}

Checkpointer::~Checkpointer() {
  if (window_open())
    log().warn("an overlapped checkpoint window was still open ({} step(s) left): not written",
               window_steps_left_);
  try {
    wait();
  } catch (const std::exception& e) {
    log().error("checkpoint write failed: {}", e.what());
  }
}

void Checkpointer::wait() {
  writer_.wait();
}

void Checkpointer::save(const nn::Module& model, const optim::Optimizer& optimizer,
                        const optim::OwnedState& owned, const TrainingState& state,
                        const std::set<std::string>& skip) {
  save_as(options_.mode, model, optimizer, owned, state, skip);
}

void Checkpointer::save_as(Mode mode, const nn::Module& model, const optim::Optimizer& optimizer,
                           const optim::OwnedState& owned, const TrainingState& state,
                           const std::set<std::string>& skip) {
  if (window_open()) {
    log().info(
        "checkpoint request at step {} skipped: the overlapped checkpoint window is "
        "still open for {} more step(s)",
        state.step, window_steps_left_);
    return;
  }
  if (writer_.running()) {
    const auto t0 = std::chrono::steady_clock::now();
    // A prepare() still running stops where it is rather than stall this step for the rest
    // of its length (when the training ranks keep every core busy it may have had little
    // CPU time); the copy below faults in what it left untouched.
    stop_preparing_ = true;
    struct Resume {
      std::atomic<bool>& stop;
      ~Resume() { stop = false; }  // also when the write it waited for failed
    } resume{stop_preparing_};
    wait();
    const double waited =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= 1.0)
      log().info(
          "checkpoint of step {} waited {:.0f} ms for the writer thread to finish its last "
          "job (a write, or preparing the snapshot buffer)",
          state.step, waited);
  }
  autograd::NoGradGuard no_grad;
  auto job = std::make_shared<Pending>();
  job->state = state;
  job->optimizer_steps = owned.steps_taken;
  job->mode = mode;
  const Selection mine = select(model, owned, skip);
  const std::set<std::string>& not_mine = mine.not_mine;
  const std::vector<optim::StateShard>& shards = mine.shards;
  const bool first_replica = mine.first_replica;
  if (mode == Mode::overlapped && options_.window > 1) {
    const auto* adamw = dynamic_cast<const optim::AdamW*>(&optimizer);
    BRAID_CHECK(adamw != nullptr,
                "overlapped checkpoints replay AdamW; this optimizer is not AdamW (use "
                "checkpoint.mode async)");
    // Unoptimized parameters never change: copied now, written with the window's state.
    if (first_replica) job->entries = unoptimized_entries(model, optimizer, not_mine, true);
    job->specs = model.shard_specs();
    job->skip = not_mine;
    window_job_ = job;
    window_steps_left_ = options_.window - 1;
    window_ = std::make_shared<OverlappedWindow>(adamw->options(), shards, options_.window,
                                                 std::move(spare_staging_));
    return;
  }
  {
    trace::Span span("checkpoint", "snapshot copy");
    RankState written = collect_rank_state(model, optimizer, shards, not_mine, first_replica);
    // Device state is copied by DMA on the copy stream; async returns once it is enqueued.
    job->copies = snapshot_values_async(written.entries, std::move(spare_image_));
    job->entries = std::move(written.entries);
    job->param_steps = std::move(written.param_steps);
    bytes_copied_ = entry_bytes(job->entries);
    if (span.active()) span.arg({"bytes", bytes_copied_}).arg({"step", state.step});
  }
  if (mode == Mode::sync) {
    trace::Span span("checkpoint", "snapshot complete");
    complete_snapshot(job->entries, job->copies, /*all_threads=*/true);
    write_and_commit(job);
    return;
  }
  start_writer(job);
}

Checkpointer::Selection Checkpointer::select(const nn::Module& model,
                                             const optim::OwnedState& owned,
                                             const std::set<std::string>& skip) const {
  Selection out;
  out.not_mine = skip;
  out.not_mine.merge(
      whole_parameters_written_by_tp0(model, grid_.has_axis("tp") ? grid_.coord("tp") : 0));
  // Replicated state (and parameters no optimizer updates) is written by replica 0.
  out.first_replica = grid_.coord("dp") == 0;
  out.shards = shards_to_write(owned, out.not_mine, out.first_replica);
  return out;
}

void Checkpointer::prepare(const nn::Module& model, const optim::Optimizer& optimizer,
                           const optim::OwnedState& owned, const std::set<std::string>& skip) {
  // running() first: spare_image_ may only be read once the writer thread has been joined.
  if (writer_.running() || spare_image_) return;
  const Selection mine = select(model, owned, skip);
  const std::vector<ShardEntry> entries =
      collect_rank_state(model, optimizer, mine.shards, mine.not_mine, mine.first_replica).entries;
  const int64_t bytes = image_bytes(entries);
  if (bytes == 0) return;
  // Device state: the image is pinned (the snapshot's DMA lands in it), and so is the window's
  // staging buffer, allocated here once instead of at the first window.
  const Device device = entries_device(entries);
  const bool overlapped = options_.mode == Mode::overlapped && options_.window > 1;
  std::vector<int64_t> window_copies;
  if (overlapped && device.is_cpu())
    window_copies = OverlappedWindow::copy_sizes(mine.shards, options_.window);
  const int64_t staging_bytes = overlapped && !device.is_cpu()
                                    ? OverlappedWindow::staging_bytes(mine.shards, options_.window)
                                    : 0;
  writer_.start([this, bytes, window_copies, device, staging_bytes] {
    // At normal priority, unlike the writes: page faults are kernel work that an idle-priority
    // thread gets no time for while the training ranks keep every core busy (with two
    // data-parallel ranks on two cores it had not touched a 190 MB image after 10 steps, and
    // the first checkpoint then waited 8 s for it). Once, a few hundred ms of CPU.
    pthread_setname_np(pthread_self(), "braid-ckpt-prep");
    spare_image_ = touched_image(bytes, &stop_preparing_, device);
    if (staging_bytes > 0 && !stop_preparing_)
      spare_staging_ = touched_image(staging_bytes, &stop_preparing_, device);
    // Blocks of the sizes the window's copies will have, touched and then freed together: the
    // host allocator's cache keeps them, so a first window copies into memory already faulted
    // in (fresh memory made the 124M shape's first window 0.5-1 s per step slower).
    std::vector<Tensor> warm;
    for (int64_t size : window_copies) {
      if (stop_preparing_) break;
      warm.push_back(Tensor::empty({size}, DType::u8));
      std::memset(warm.back().data_ptr(), 0, static_cast<size_t>(size));
    }
  });
}

void Checkpointer::start_writer(std::shared_ptr<Pending> job, std::function<void()> prepare) {
  writer_.start([this, job, prepare = std::move(prepare)] {
    pthread_setname_np(pthread_self(), "braid-ckpt-wr");  // named in top, perf and gdb
    trace::name_this_thread("checkpoint write");
    // Replay, checksums and staging use only CPU time the training threads leave idle.
    run_at_idle_priority();
    if (prepare) prepare();
    write_and_commit(job);
  });
}

void Checkpointer::save_now(const nn::Module& model, const optim::Optimizer& optimizer,
                            const optim::OwnedState& owned, const TrainingState& state,
                            const std::set<std::string>& skip) {
  if (window_open())
    log().info("overlapped checkpoint window abandoned at step {}: saving the final state now",
               state.step);
  window_.reset();
  window_job_.reset();
  window_steps_left_ = 0;
  save_as(options_.mode == Mode::overlapped ? Mode::async : options_.mode, model, optimizer, owned,
          state, skip);
}

void Checkpointer::before_update(const optim::OwnedState& owned, float lr, float grad_scale,
                                 bool skipped) {
  if (window_) window_->before_update(window_shards(owned), lr, grad_scale, skipped);
}

void Checkpointer::before_update(const optim::OwnedState& owned, float lr, const Tensor& grad_scale,
                                 const Tensor& skipped) {
  if (window_) window_->before_update(window_shards(owned), lr, grad_scale, skipped);
}

std::vector<optim::StateShard> Checkpointer::window_shards(const optim::OwnedState& owned) const {
  return shards_to_write(owned, window_job_->skip, grid_.coord("dp") == 0);
}

void Checkpointer::after_update(const optim::OwnedState& owned,
                                const std::function<TrainingState()>& state) {
  if (!window_open()) return;
  const int rank = grid_.world()->rank();
  const int64_t landing = window_job_->state.step + options_.window - 1;
  crash_if_requested(window_steps_left_ == 1 ? "replay" : "window", landing, rank);
  const std::vector<optim::StateShard> shards = window_shards(owned);
  const bool copied = window_->after_update(shards);
  if (--window_steps_left_ > 0) return;
  BRAID_CHECK(copied, "overlapped checkpoint window ended before its last block was copied");
  finish_window(shards, owned.steps_taken, state());
}

void Checkpointer::finish_window(const std::vector<optim::StateShard>& shards,
                                 int64_t optimizer_steps, const TrainingState& state) {
  std::shared_ptr<Pending> job = std::move(window_job_);
  job->state = state;
  job->optimizer_steps = optimizer_steps;
  std::shared_ptr<OverlappedWindow> window = std::move(window_);
  bytes_copied_ = window->bytes_copied() + entry_bytes(job->entries);  // + unoptimized params
  // The replay works on the window's private copies, so it runs on the writer thread, before
  // the write, instead of holding up training (start_writer first waits for an earlier write).
  start_writer(job, [this, job, window, shards] {
    omp_set_num_threads(1);  // the training threads keep both cores
    window->finish();
    // The window's copies in place of the live tensors, cut into boxes like any save.
    std::vector<optim::StateShard> copied = shards;
    const auto& copies = window->copies();
    for (size_t i = 0; i < copied.size(); ++i) {
      copied[i].value = copies[i].value;
      copied[i].state = {{"exp_avg", copies[i].exp_avg}, {"exp_avg_sq", copies[i].exp_avg_sq}};
      copied[i].steps = copies[i].steps;
      copied[i].grad = Tensor();  // never read from the live gradient off the training thread
    }
    RankState mine = shard_entries(job->specs, copied);
    for (ShardEntry& e : mine.entries) job->entries.push_back(std::move(e));
    job->param_steps = std::move(mine.param_steps);
    // Copied once more, with the unoptimized parameters, into an image as async writes it:
    // the copy checksums on the way and the disk takes the image in place, which costs this
    // thread less than checksumming the copies and staging them.
    {
      trace::Span span("checkpoint", "snapshot image");
      snapshot_values(job->entries, std::move(spare_image_));
    }
    // Nothing reads the window's pinned copies any more: the next window reuses the buffer.
    if (window->staging()) spare_staging_ = window->staging();
  });
}

void Checkpointer::write_and_commit(const std::shared_ptr<Pending>& job) {
  trace::Span span("checkpoint");
  if (span.active())
    span.name(fmt::format("write step {}", job->state.step)).arg({"step", job->state.step});
  // An async snapshot of device state: its DMA ends here, on the writer thread, checksums after.
  complete_snapshot(job->entries, job->copies, /*all_threads=*/false);
  const fs::path dir = options_.dir;
  const std::string name = step_folder_name(job->state.step);
  const fs::path tmp = dir / (name + ".tmp");
  const int rank = grid_.world()->rank();
  if (rank == 0) {
    fs::create_directories(dir);
    fs::remove_all(tmp);  // a crashed earlier attempt at this step
    fs::create_directories(tmp);
  }
  channel_->barrier()->wait();

  // How many ranks write is fixed by the strategy, but only each rank knows its part.
  const bool writes = !job->entries.empty();
  Tensor writers = Tensor::full({1}, writes ? 1.0f : 0.0f);
  channel_->all_reduce(writers, dist::ReduceOp::sum)->wait();
  if (writes) {
    trace::Span write("checkpoint", "write shard");
    if (write.active()) write.arg({"bytes", entry_bytes(job->entries)});
    write_rank_shard(tmp, rank, job->entries, job->param_steps, job->state.step);
  }
  channel_->barrier()->wait();

  if (rank == 0) {
    proto::Manifest global;
    global.set_format_version(kFormatVersion);
    global.set_step(job->state.step);
    for (const auto& axis : grid_.axes()) (*global.mutable_grid())[axis.name] = axis.size;
    global.set_optimizer_steps(job->optimizer_steps);
    global.mutable_sampler()->set_seed(job->state.sampler.seed);
    global.mutable_sampler()->set_epoch(job->state.sampler.epoch);
    global.mutable_sampler()->set_position(job->state.sampler.position);
    global.set_config(job->state.config);
    const char* modes[] = {"sync", "async", "overlapped"};
    global.set_mode(modes[static_cast<int>(job->mode)]);
    global.set_created_unix(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
    commit_checkpoint(dir, tmp, std::move(global), static_cast<int>(writers.item()), options_.keep);
  }
  channel_->barrier()->wait();
  // Written: the image is free for the next snapshot, which waits for this thread first.
  spare_image_ = image_of(job->entries);
}

}  // namespace braid::ckpt
