// OpEngine: issue, the progress thread, caller-run fast path, retirement, timeouts and failure,
// for every process-group backend.
#include "dist/op_engine.h"

#include <fmt/format.h>
#include <pthread.h>

#include "braid/core/logging.h"
#include "braid/core/trace.h"
#include "braid/dist/collective_log.h"

namespace braid::dist::detail {

std::shared_ptr<OpEngine> OpEngine::start(EngineConfig config) {
  auto engine = std::shared_ptr<OpEngine>(new OpEngine(std::move(config)));
  engine->monitored_ = MpiRuntime::active();
  if (engine->monitored_) MpiRuntime::get().add_group(engine);
  // The thread owns a reference so that a detached thread (stuck in MPI after a timeout) never
  // outlives the engine it touches.
  engine->thread_ = std::thread([self = engine] { self->progress(); });
  return engine;
}

OpEngine::OpEngine(EngineConfig config) : config_(std::move(config)) {}

OpEngine::~OpEngine() {
  if (thread_.joinable()) thread_.detach();  // only after a shutdown that left it in MPI
}

std::shared_ptr<EngineWork> OpEngine::issue(std::unique_ptr<EngineOp> op) {
  if (config_.release_on_caller) release_retired();
  auto work = std::make_shared<EngineWork>(shared_from_this());
  op->work = work;
  std::unique_lock post_lock(post_mutex_, std::defer_lock);
  if (op->post_at_issue) post_lock.lock();
  std::unique_lock lock(mutex_);
  BRAID_CHECK(
      !stopping_,
      "group '{}' was shut down (destroyed or braid::dist::finalize()); {} cannot run on it",
      config_.name, op_kind_name(op->kind));
  if (is_collective(op->kind)) op->seq = ++issued_;
  CollectiveRecord record;
  record.group = config_.name;
  record.op = std::string(op_kind_name(op->kind));
  record.seq = op->seq;
  record.peer = op->peer;
  record.dtype = op->dtype;
  record.numel = op->numel;
  record.issued = std::chrono::system_clock::now();
  op->ticket = collective_log().add(std::move(record));
  if (failure_) {
    complete_locked(*work, failure_, op->ticket, CollectiveStatus::failed);
    return work;
  }
  if (op->post_at_issue) {
    // Posted here, in issue order (post_mutex_), and watched from the start: a post may block
    // (a stand-in transport) and must still time out.
    EngineOp& posted = *op;
    start_locked(posted, /*by_caller=*/true);
    active_.push_back(std::move(op));
    queue_cv_.notify_one();  // the progress thread watches it from now on
    lock.unlock();
    collective_log().mark_started(posted.ticket);
    std::exception_ptr error = try_post(posted);
    lock.lock();
    // Marked under the lock: until then the progress thread neither tests nor retires it.
    if (error) {
      posted.error = error;
      posted.finished.store(true, std::memory_order_release);
    } else {
      posted.posted.store(true, std::memory_order_release);
    }
    fail_if_group_error_locked(posted);
    // The progress thread retires it; once that thread left (a failed group), this caller does.
    if (thread_exited_) retire_locked();
    queue_cv_.notify_one();
    lock.unlock();
    after_failure();
    return work;
  }
  op->pattern = (static_cast<uint64_t>(op->kind) << 56) ^ static_cast<uint64_t>(op->numel);
  // An idle progress thread is normally woken at once, so that an operation nobody waits for
  // yet still starts. When the last operation of the same kind and size was run by a caller
  // that waited for it straight away, this one probably will be too, and waking the thread
  // for nothing costs more than the transfer of a few hundred KiB on a busy machine. It then
  // stays unannounced; if no wait() claims it, the next issue or, within ~2 ms, the control
  // thread (nudge()) wakes the progress thread after all.
  const bool idle = queue_.empty() && active_.empty() && !executing_ && !caller_op_;
  const bool defer = op->polled && monitored_ && idle && claimed_by_caller_.count(op->pattern);
  queue_.push_back(std::move(op));
  if (defer) {
    unannounced_since_ = std::chrono::steady_clock::now();
    unannounced_ = true;
  } else {
    unannounced_ = false;
    queue_cv_.notify_one();
  }
  return work;
}

void OpEngine::drain() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return (queue_.empty() && active_.empty() && !caller_op_) || failure_; });
    if (failure_) std::rethrow_exception(failure_);
  }
  if (config_.release_on_caller) release_retired();
}

std::exception_ptr OpEngine::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

// ---- MonitoredGroup --------------------------------------------------------------------------

void OpEngine::nudge(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (!unannounced_ || now - unannounced_since_ < std::chrono::milliseconds(1)) return;
  unannounced_ = false;
  queue_cv_.notify_one();
}

SeqState OpEngine::seq_state() const {
  std::lock_guard lock(mutex_);
  return {issued_, started_, completed_, started_op_};
}

std::optional<StuckOp> OpEngine::take_expired(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (failure_ || diagnosing_) return std::nullopt;
  std::vector<const EngineOp*> running;
  if (caller_op_) running.push_back(caller_op_.get());
  for (const auto& op : active_) running.push_back(op.get());
  for (const EngineOp* op : running) {
    if (op->finished.load(std::memory_order_acquire)) continue;
    // Queued behind earlier work on its transport: not started, so not late.
    if (!op->clock_running.load(std::memory_order_acquire)) continue;
    if (now - op->started < op->timeout) return std::nullopt;
    diagnosing_ = true;
    StuckOp stuck;
    stuck.group_key = config_.key;
    stuck.group_name = config_.name;
    stuck.backend = config_.backend;
    stuck.kind = op->kind;
    stuck.seq = op->seq;
    stuck.peer = op->peer;
    stuck.tag = op->tag;
    stuck.detail = op->describe ? op->describe() : std::string("-");
    stuck.timeout = op->timeout;
    stuck.elapsed_s = std::chrono::duration<double>(now - op->started).count();
    stuck.group_rank = config_.rank;
    stuck.world_ranks = config_.world_ranks;
    stuck.ticket = op->ticket;
    return stuck;
  }
  return std::nullopt;
}

void OpEngine::fail_expired(const StuckOp& stuck, const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    diagnosing_ = false;
    if (failure_) return;
    bool still_running =
        caller_op_ && caller_op_->ticket == stuck.ticket && !caller_op_->finished.load();
    for (const auto& op : active_)
      if (op->ticket == stuck.ticket) still_running = !op->finished.load();
    if (!still_running) {
      log().warn(
          "group '{}' {} seq {} completed while its peers were being asked, after its {:.1f}s "
          "timeout",
          config_.name, op_kind_name(stuck.kind), stuck.seq, stuck.timeout.count() / 1000.0);
      return;
    }
  }
  // Logged before any waiter is woken: the waiter typically ends the job at once.
  log().error("{}", message);
  collective_log().mark_finished(stuck.ticket, CollectiveStatus::timed_out);
  collective_log().dump_to_log(fmt::format("group '{}' timed out", config_.name));
  {
    std::lock_guard lock(mutex_);
    if (!failure_) {
      failure_logged_ = true;
      fail_locked(std::make_exception_ptr(Error(message)), stuck.ticket);
    }
  }
  after_failure();
}

void OpEngine::shutdown() {
  std::unique_lock lock(mutex_);
  if (closed_) return;
  stopping_ = true;
  queue_cv_.notify_all();
  // Queued operations still run (the peers expect them); the watchdog bounds the wait by failing
  // the group at its timeout. A failed group's thread may be stuck in MPI for good.
  cv_.wait(lock, [&] { return (thread_exited_ && !caller_op_) || (failure_ && in_blocking_run_); });
  closed_ = true;
  if (thread_exited_) {
    lock.unlock();
    thread_.join();
    if (config_.release) config_.release();
  } else {
    detached_ = true;
    MpiRuntime::get().thread_detached_in_mpi();
    thread_.detach();
    lock.unlock();
    log().warn(
        "group '{}': its progress thread is still inside a timed-out MPI call; leaving it behind",
        config_.name);
  }
  if (monitored_) MpiRuntime::get().remove_group(config_.key);
  release_retired();
}

// ---- running operations ------------------------------------------------------------------------

// Runs the operation of `work` on the calling thread when it is next in line, is a polled run,
// and the progress thread is not running an operation. A wait() right after the issue then
// skips the hand-off to the progress thread and the wake-up back, two thread switches per
// operation. A polled run still gives up when the group
// fails (the watchdog sees the op), so wait() keeps its timeout and diagnosis. Blocking runs
// stay on the progress thread, which may be left inside one.
void OpEngine::run_if_next(const EngineWork& work) {
  std::unique_lock lock(mutex_);
  if (failure_ || caller_op_ || executing_ || queue_.empty()) return;
  if (queue_.front()->work.get() != &work || !queue_.front()->polled) return;
  caller_op_ = std::move(queue_.front());
  queue_.pop_front();
  EngineOp& op = *caller_op_;
  start_locked(op, /*by_caller=*/true);
  lock.unlock();
  collective_log().mark_started(op.ticket);
  execute(op);
  lock.lock();
  fail_if_group_error_locked(op);
  retire_one_locked(std::move(caller_op_));
  // Wake the progress thread only for what was queued behind this op: a needless wake-up
  // displaces a thread on a busy machine, a cost a small collective notices.
  if (!queue_.empty()) queue_cv_.notify_one();
  cv_.notify_all();  // shutdown() waits for the caller's op too
  lock.unlock();
  after_failure();
}

// Remembers, per kind and size, whether a waiting caller ran the last such run (see issue()).
void OpEngine::note_who_ran_locked(const EngineOp& op, bool caller) {
  if (queue_.empty()) unannounced_ = false;
  if (!op.polled) return;
  if (!caller) {
    claimed_by_caller_.erase(op.pattern);
    return;
  }
  if (claimed_by_caller_.size() >= 64) claimed_by_caller_.clear();  // a bound, rarely reached
  claimed_by_caller_.insert(op.pattern);
}

// Marks an operation as started, by the progress thread or a caller.
void OpEngine::start_locked(EngineOp& op, bool by_caller) {
  note_who_ran_locked(op, by_caller);
  op.started = std::chrono::steady_clock::now();
  if (!op.reached) op.clock_running.store(true, std::memory_order_release);
  if (is_collective(op.kind)) {
    started_ = op.seq;
    started_op_ = op.kind;
  }
}

void OpEngine::progress() {
  pthread_setname_np(pthread_self(), config_.thread_name);
  std::unique_lock lock(mutex_);
  auto poll = std::chrono::microseconds(20);
  for (;;) {
    retire_locked();
    if (failure_) {
      lock.unlock();
      after_failure();  // a posted op's error may have failed the group while retiring
      lock.lock();
      break;
    }
    if (!may_start_next_locked()) {
      if (active_.empty()) {
        if (stopping_ && !caller_op_) break;
        queue_cv_.wait(lock, [&] {
          return may_start_next_locked() || !active_.empty() || (stopping_ && !caller_op_) ||
                 failure_;
        });
        poll = std::chrono::microseconds(20);
        continue;
      }
      // Only posted ops are unfinished: test them, and back off while nothing moves. Only this
      // thread removes ops from active_, and ops never move, so the pointers stay valid.
      polling_.clear();
      for (const auto& op : active_)
        if (!op->run && !op->finished.load(std::memory_order_acquire)) polling_.push_back(op.get());
      lock.unlock();
      const bool progressed = test_posted();
      if (!monitored_) check_deadlines();
      lock.lock();
      if (progressed) {
        poll = std::chrono::microseconds(20);
      } else if (!may_start_next_locked() && !failure_) {
        queue_cv_.wait_for(lock, poll);
        poll = std::min<std::chrono::microseconds>(poll * 2, std::chrono::milliseconds(1));
      }
      continue;
    }
    std::unique_ptr<EngineOp> owned = std::move(queue_.front());
    queue_.pop_front();
    EngineOp* op = owned.get();
    start_locked(*op, /*by_caller=*/false);
    active_.push_back(std::move(owned));
    in_blocking_run_ = op->run && !op->polled;
    executing_ = true;
    lock.unlock();
    collective_log().mark_started(op->ticket);
    execute(*op);
    lock.lock();
    in_blocking_run_ = false;
    executing_ = false;
    fail_if_group_error_locked(*op);
    if (failure_) {
      lock.unlock();
      after_failure();
      lock.lock();
    }
  }
  if (failure_) abandon_posted_locked();
  thread_exited_ = true;
  cv_.notify_all();
  if (detached_) {
    lock.unlock();
    if (config_.release) config_.release();
    MpiRuntime::get().detached_thread_left_mpi();
  }
}

void OpEngine::execute(EngineOp& op) {
  try {
    if (op.run) {
      op.run(keep_waiting_);
      op.finished.store(true, std::memory_order_release);
    } else if (std::exception_ptr error = try_post(op)) {
      op.error = error;
      op.finished.store(true, std::memory_order_release);
    } else {
      op.posted.store(true, std::memory_order_release);
      // A send or recv that is done at once retires without another round of the loop.
      test_one(op);
    }
  } catch (const RingAbandoned&) {
    op.abandoned = true;
    op.error = std::current_exception();
    op.finished.store(true, std::memory_order_release);
  } catch (...) {
    op.error = std::current_exception();
    op.finished.store(true, std::memory_order_release);
  }
}

// Runs op.post; returns its error, null once posted. The caller marks the op.
std::exception_ptr OpEngine::try_post(EngineOp& op) {
  try {
    op.post(keep_waiting_);
    return nullptr;
  } catch (const RingAbandoned&) {
    op.abandoned = true;  // the transport may still write into its buffers
    return std::current_exception();
  } catch (...) {
    return std::current_exception();
  }
}

// Returns true when the op finished (or failed).
bool OpEngine::test_one(EngineOp& op) {
  bool done = false;
  try {
    done = op.test(op);
  } catch (...) {
    op.error = std::current_exception();
    done = true;
  }
  if (done) {
    op.finished.store(true, std::memory_order_release);
  } else if (op.reached && !op.clock_running.load(std::memory_order_relaxed) && op.reached()) {
    op.started = std::chrono::steady_clock::now();
    op.clock_running.store(true, std::memory_order_release);
  }
  return done;
}

bool OpEngine::test_posted() {
  bool any = false;
  for (EngineOp* op : polling_) {
    if (op->posted.load(std::memory_order_acquire)) {
      any |= test_one(*op);
    } else if (op->reached && !op->clock_running.load(std::memory_order_relaxed) && op->reached()) {
      // Still inside a post that blocks (the stand-in): its clock runs once the transport
      // reached it, like a posted op's.
      op->started = std::chrono::steady_clock::now();
      op->clock_running.store(true, std::memory_order_release);
    }
  }
  return any;
}

// Without the control channel: the progress thread is the watchdog, and no peer can be asked.
void OpEngine::check_deadlines() {
  if (auto stuck = take_expired(std::chrono::steady_clock::now()))
    fail_expired(*stuck, describe_unasked(*stuck));
}

// A failed group's posted ops may never complete: each is handed back to its transport and
// leaked on purpose (with the tensors it may still write into); the job is ending.
void OpEngine::abandon_posted_locked() {
  for (auto& op : active_) {
    if (op->finished.load()) {
      if (op->abandoned) op.release();  // NOLINT(bugprone-unused-return-value): see EngineOp
      continue;
    }
    if (op->run) continue;
    // Still being posted on a caller's thread: that caller owns it until post() returns.
    if (!op->posted.load()) {
      op.release();  // NOLINT(bugprone-unused-return-value): leaked, see above
      continue;
    }
    if (op->abandon) op->abandon();
    op.release();  // NOLINT(bugprone-unused-return-value): see above
  }
  active_.clear();
}

// Retires every finished operation. Collectives start one at a time in issue order, so they
// finish in that order anyway; a send or recv completes as soon as it is done, whatever was
// posted before it (a pipeline waits for the activation it needs now while an earlier-posted
// receive for later is still open).
void OpEngine::retire_locked() {
  for (auto it = active_.begin(); it != active_.end();) {
    if (!(*it)->finished.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    std::unique_ptr<EngineOp> op = std::move(*it);
    it = active_.erase(it);
    retire_one_locked(std::move(op));
  }
}

// A retired operation on the trace: a collective on its group's communication track, from its
// start on the transport (not before the previous one of the group ended: they run in order) to
// its retirement; a send or recv as an asynchronous span, since several may be open at once.
void OpEngine::trace_locked(const EngineOp& op) {
  const auto end = std::chrono::steady_clock::now();
  std::vector<trace::Arg> args = {{"op", std::string(op_kind_name(op.kind))},
                                  {"group", config_.name},
                                  {"bytes", op.numel * static_cast<int64_t>(dtype_size(op.dtype))},
                                  {"backend", config_.backend}};
  if (!is_collective(op.kind)) {
    args.emplace_back("peer", op.peer);
    args.emplace_back("tag", op.tag);
    trace::async_span(std::string(op_kind_name(op.kind)), "p2p", op.ticket, op.started, end,
                      std::move(args));
    return;
  }
  args.emplace_back("seq", op.seq);
  const auto start = std::max(op.started, traced_until_);
  traced_until_ = end;
  trace::complete_on("communication " + config_.name, std::string(op_kind_name(op.kind)),
                     "collective", start, end, std::move(args));
}

// Completes a finished operation's Work. An abandoned run is leaked (see EngineOp).
void OpEngine::retire_one_locked(std::unique_ptr<EngineOp> op) {
  fail_if_group_error_locked(*op);
  if (trace::enabled() && !op->error) trace_locked(*op);
  if (is_collective(op->kind) && !op->error) completed_ = op->seq;
  complete_locked(*op->work, op->error, op->ticket,
                  op->error ? CollectiveStatus::failed : CollectiveStatus::done);
  if (op->abandoned) {
    op.release();  // NOLINT(bugprone-unused-return-value): see `abandoned`
    return;
  }
  op->work.reset();
  if (config_.release_on_caller) retired_.push_back(std::move(op));
}

// After an op ended with an error: collectives (and whatever the transport says) leave the
// members out of step for good.
void OpEngine::fail_if_group_error_locked(const EngineOp& op) {
  if (!op.finished.load() || !op.error || failure_) return;
  if (is_collective(op.kind) || op.error_fails_group) fail_locked(op.error, 0);
}

void OpEngine::complete_locked(EngineWork& work, std::exception_ptr error, uint64_t ticket,
                               CollectiveStatus status) {
  if (work.done_) return;  // already failed with the group
  work.done_ = true;
  work.error_ = std::move(error);
  work.done_hint_.store(true, std::memory_order_release);
  collective_log().mark_finished(ticket, status);
  cv_.notify_all();
}

// Fails every outstanding Work. The ops stay in active_ (their tensors stay alive) since the
// transport may still write into them.
void OpEngine::fail_locked(std::exception_ptr error, uint64_t timed_out_ticket) {
  failure_ = error;
  failed_.store(true, std::memory_order_release);
  if (caller_op_)
    complete_locked(*caller_op_->work, error, caller_op_->ticket,
                    caller_op_->ticket == timed_out_ticket ? CollectiveStatus::timed_out
                                                           : CollectiveStatus::failed);
  for (auto& op : active_)
    complete_locked(
        *op->work, error, op->ticket,
        op->ticket == timed_out_ticket ? CollectiveStatus::timed_out : CollectiveStatus::failed);
  for (auto& op : queue_) complete_locked(*op->work, error, op->ticket, CollectiveStatus::failed);
  queue_.clear();
  queue_cv_.notify_all();
  cv_.notify_all();
}

// Runs the transport's failure hook once, outside the locks.
void OpEngine::after_failure() {
  std::exception_ptr error;
  bool logged = false;
  {
    std::lock_guard lock(mutex_);
    if (!failure_ || failure_handled_) return;
    failure_handled_ = true;
    error = failure_;
    logged = failure_logged_;
  }
  if (config_.on_failure) config_.on_failure(error, logged);
}

void OpEngine::release_retired() {
  std::vector<std::unique_ptr<EngineOp>> released;
  std::lock_guard lock(mutex_);
  released.swap(retired_);
  // Destroyed after the lock is dropped (members are destroyed in reverse order).
}

// ---- EngineWork --------------------------------------------------------------------------------

void EngineWork::wait() {
  // The host blocks here: the step's communication wait (trace.h's comm_wait phase).
  const trace::PhaseScope waiting(trace::Phase::comm_wait);
  if (!done_hint_.load(std::memory_order_acquire)) engine_->run_if_next(*this);
  // Most waits come right after the issue. Yielding in a short loop first lets the progress
  // thread run and usually catches the completion without a sleep/wake round trip, which
  // otherwise costs more than the transfer itself for messages of a few MiB.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  while (!done_hint_.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < spin_until)
    std::this_thread::yield();
  std::unique_lock lock(engine_->mutex_);
  engine_->cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool EngineWork::is_completed() {
  std::lock_guard lock(engine_->mutex_);
  return done_;
}

std::exception_ptr EngineWork::error() const {
  std::lock_guard lock(engine_->mutex_);
  return error_;
}

}  // namespace braid::dist::detail
