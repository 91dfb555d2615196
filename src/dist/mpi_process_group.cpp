// MpiProcessGroup: validation at issue time, a per-group progress thread running the queued
// operations in order, in-order completion of Works, and failure on timeout.
#include "braid/dist/mpi_process_group.h"

#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "braid/core/logging.h"
#include "braid/dist/collective_log.h"
#include "dist/mpi_ring.h"
#include "dist/mpi_runtime.h"

namespace braid::dist {
namespace detail {

class MpiWork;

// What a collective runs with: the group's communicator, the one reserved for braid's ring
// collectives (mpi_ring.h), and the ring's "keep waiting?" test, false once the group failed.
struct RunContext {
  MPI_Comm comm;
  MPI_Comm ring_comm;
  const KeepWaiting& keep_waiting;
};

// One issued operation. Collectives run to completion on the progress thread, as one blocking
// MPI call or as a polled ring that gives up when the group fails; send and recv are posted as one
// request and tested until done, so later operations can be posted meanwhile (a ring where
// everyone sends first must not deadlock).
struct PendingOp {
  OpKind kind = OpKind::none;
  int64_t seq = 0;
  int peer = -1;
  int tag = 0;
  // What the op moves, in words, for a timeout diagnosis. Built only when one is made: formatting
  // at issue took ~3 us of a 1 MiB all_gather's ~80 us, with fmt's code and data evicted from the
  // caches by each transfer.
  std::function<std::string()> describe;
  std::chrono::milliseconds timeout{0};
  std::function<void(const RunContext&)> run;
  bool polled = false;   // `run` is a ring that gives up when the group fails (never stuck in MPI)
  uint64_t pattern = 0;  // kind and size: operations alike in both are assumed used alike
  std::function<void(MPI_Comm, MPI_Request*)> post;
  std::function<void(const MPI_Status&)> check;  // recv: validates what arrived
  MPI_Request request = MPI_REQUEST_NULL;
  std::shared_ptr<MpiWork> work;
  uint64_t ticket = 0;
  std::chrono::steady_clock::time_point started;
  // Written by the progress thread; read by the watchdog to find the oldest unfinished op.
  std::atomic<bool> finished{false};
  std::exception_ptr error;  // set before `finished`
  // A ring that gave up when the group failed: MPI may still write into its tensors, so the op
  // is leaked, never freed.
  bool abandoned = false;
};

class MpiGroupState;

class MpiWork final : public Work {
 public:
  explicit MpiWork(std::shared_ptr<MpiGroupState> group) : group_(std::move(group)) {}
  void wait() override;
  bool is_completed() override;
  std::exception_ptr error() const override;

 private:
  friend class MpiGroupState;
  std::shared_ptr<MpiGroupState> group_;
  // Guarded by the group's mutex.
  bool done_ = false;
  std::exception_ptr error_;
  // Mirrors done_ for wait()'s lock-free spin; set after done_, under the same mutex.
  std::atomic<bool> done_hint_{false};
};

class MpiGroupState final : public MonitoredGroup,
                            public std::enable_shared_from_this<MpiGroupState> {
 public:
  MpiGroupState(MPI_Comm comm, MPI_Comm ring_comm, uint64_t key, std::string name, int rank,
                int size, std::vector<int> world_ranks)
      : comm_(comm),
        ring_comm_(ring_comm),
        key_(key),
        name_(std::move(name)),
        rank_(rank),
        size_(size),
        world_ranks_(std::move(world_ranks)) {}

  void start() {
    // The thread owns a reference so that a detached thread (stuck in MPI after a timeout) never
    // outlives the state it touches.
    thread_ = std::thread([self = shared_from_this()] { self->run(); });
  }

  MPI_Comm comm() const { return comm_; }
  const std::string& name() const { return name_; }

  WorkPtr issue(std::unique_ptr<PendingOp> op, DType dtype, int64_t numel) {
    auto work = std::make_shared<MpiWork>(shared_from_this());
    op->work = work;
    std::lock_guard lock(mutex_);
    BRAID_CHECK(
        !stopping_,
        "group '{}' was shut down (destroyed or braid::dist::finalize()); {} cannot run on it",
        name_, op_kind_name(op->kind));
    if (is_collective(op->kind)) op->seq = ++issued_;
    CollectiveRecord record;
    record.group = name_;
    record.op = std::string(op_kind_name(op->kind));
    record.seq = op->seq;
    record.peer = op->peer;
    record.dtype = dtype;
    record.numel = numel;
    record.issued = std::chrono::system_clock::now();
    op->ticket = collective_log().add(std::move(record));
    if (failure_) {
      complete_locked(*work, failure_, op->ticket, CollectiveStatus::failed);
      return work;
    }
    op->pattern = (static_cast<uint64_t>(op->kind) << 56) ^ static_cast<uint64_t>(numel);
    // An idle progress thread is normally woken at once, so that an operation nobody waits for
    // yet still starts. When the last operation of the same kind and size was run by a caller
    // that waited for it straight away, this one probably will be too, and waking the thread
    // for nothing costs more than the transfer of a few hundred KiB on a busy machine. It then
    // stays unannounced; if no wait() claims it, the next issue or, within ~2 ms, the control
    // thread (nudge()) wakes the progress thread after all.
    const bool idle = queue_.empty() && active_.empty() && !executing_ && !caller_op_;
    const bool defer = op->polled && idle && claimed_by_caller_.count(op->pattern);
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

  // ---- MonitoredGroup ------------------------------------------------------------------------

  uint64_t key() const override { return key_; }

  void nudge(std::chrono::steady_clock::time_point now) override {
    std::lock_guard lock(mutex_);
    if (!unannounced_ || now - unannounced_since_ < std::chrono::milliseconds(1)) return;
    unannounced_ = false;
    queue_cv_.notify_one();
  }

  SeqState seq_state() const override {
    std::lock_guard lock(mutex_);
    return {issued_, started_, completed_, started_op_};
  }

  std::optional<StuckOp> take_expired(std::chrono::steady_clock::time_point now) override {
    std::lock_guard lock(mutex_);
    if (failure_ || diagnosing_) return std::nullopt;
    std::vector<const PendingOp*> running;
    if (caller_op_) running.push_back(caller_op_.get());
    for (const auto& op : active_) running.push_back(op.get());
    for (const PendingOp* op : running) {
      if (op->finished.load(std::memory_order_acquire)) continue;
      if (now - op->started < op->timeout) return std::nullopt;
      diagnosing_ = true;
      StuckOp stuck;
      stuck.group_key = key_;
      stuck.group_name = name_;
      stuck.kind = op->kind;
      stuck.seq = op->seq;
      stuck.peer = op->peer;
      stuck.tag = op->tag;
      stuck.detail = op->describe();
      stuck.timeout = op->timeout;
      stuck.elapsed_s = std::chrono::duration<double>(now - op->started).count();
      stuck.group_rank = rank_;
      stuck.world_ranks = world_ranks_;
      stuck.ticket = op->ticket;
      return stuck;
    }
    return std::nullopt;
  }

  void fail_expired(const StuckOp& stuck, const std::string& message) override {
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
            name_, op_kind_name(stuck.kind), stuck.seq, stuck.timeout.count() / 1000.0);
        return;
      }
    }
    // Logged before any waiter is woken: the waiter typically ends the job at once.
    log().error("{}", message);
    collective_log().mark_finished(stuck.ticket, CollectiveStatus::timed_out);
    collective_log().dump_to_log(fmt::format("group '{}' timed out", name_));
    std::lock_guard lock(mutex_);
    if (!failure_) fail_locked(std::make_exception_ptr(Error(message)), stuck.ticket);
  }

  void shutdown() override {
    std::unique_lock lock(mutex_);
    if (closed_) return;
    stopping_ = true;
    queue_cv_.notify_all();
    // Queued operations still run (the peers expect them); the watchdog bounds the wait by failing
    // the group at its timeout. A failed group's thread may be stuck in MPI for good.
    cv_.wait(lock, [&] { return (thread_exited_ && !caller_op_) || (failure_ && in_mpi_); });
    closed_ = true;
    if (thread_exited_) {
      lock.unlock();
      thread_.join();
      free_communicators();
    } else {
      detached_ = true;
      MpiRuntime::get().thread_detached_in_mpi();
      thread_.detach();
      lock.unlock();
      log().warn(
          "group '{}': its progress thread is still inside a timed-out MPI call; leaving it behind",
          name_);
    }
    MpiRuntime::get().remove_group(key_);
  }

  // Runs the operation of `work` on the calling thread when it is next in line, is a polled
  // ring, and the progress thread is not running an operation. A wait() right after the issue
  // then skips the hand-off to the progress thread and the wake-up back (together 15-30 us per
  // operation when measured, docs/performance.md). A ring still gives up when the group fails
  // (the watchdog sees the op), so wait() keeps its timeout and diagnosis. Blocking MPI calls
  // stay on the progress thread, which may be left inside one.
  void run_if_next(const MpiWork& work) {
    std::unique_lock lock(mutex_);
    if (failure_ || caller_op_ || executing_ || queue_.empty()) return;
    if (queue_.front()->work.get() != &work || !queue_.front()->polled) return;
    caller_op_ = std::move(queue_.front());
    queue_.pop_front();
    PendingOp& op = *caller_op_;
    start_locked(op, /*by_caller=*/true);
    lock.unlock();
    collective_log().mark_started(op.ticket);
    execute(op);
    lock.lock();
    fail_if_collective_failed_locked(op);
    retire_one_locked(std::move(caller_op_));
    // Wake the progress thread only for what was queued behind this op: a needless wake-up
    // displaces a thread on a busy machine, 5-10 us of a 1 MiB all_gather on 2 ranks here.
    if (!queue_.empty()) queue_cv_.notify_one();
    cv_.notify_all();  // shutdown() waits for the caller's op too
  }

 private:
  friend class MpiWork;

  // Remembers, per kind and size, whether a waiting caller ran the last such ring (see issue()).
  void note_who_ran_locked(const PendingOp& op, bool caller) {
    if (queue_.empty()) unannounced_ = false;
    if (!op.polled) return;
    if (!caller) {
      claimed_by_caller_.erase(op.pattern);
      return;
    }
    if (claimed_by_caller_.size() >= 64) claimed_by_caller_.clear();  // a bound, rarely reached
    claimed_by_caller_.insert(op.pattern);
  }

  // The progress thread may start the front of the queue: nothing runs on a caller's thread.
  bool may_start_next_locked() const { return !queue_.empty() && !caller_op_; }

  void run() {
    pthread_setname_np(pthread_self(), "braid-mpi-pg");
    std::unique_lock lock(mutex_);
    auto poll = std::chrono::microseconds(20);
    for (;;) {
      retire_locked();
      if (failure_) break;
      if (!may_start_next_locked()) {
        if (active_.empty()) {
          if (stopping_ && !caller_op_) break;
          queue_cv_.wait(lock, [&] {
            return may_start_next_locked() || (stopping_ && !caller_op_) || failure_;
          });
          poll = std::chrono::microseconds(20);
          continue;
        }
        // Only send/recv are unfinished: test them, and back off while nothing moves.
        lock.unlock();
        const bool progressed = test_requests();
        lock.lock();
        if (progressed) {
          poll = std::chrono::microseconds(20);
        } else if (!may_start_next_locked() && !failure_) {
          queue_cv_.wait_for(lock, poll);
          poll = std::min<std::chrono::microseconds>(poll * 2, std::chrono::milliseconds(1));
        }
        continue;
      }
      std::unique_ptr<PendingOp> owned = std::move(queue_.front());
      queue_.pop_front();
      PendingOp* op = owned.get();
      start_locked(*op, /*by_caller=*/false);
      active_.push_back(std::move(owned));
      in_mpi_ = op->run && !op->polled;
      executing_ = true;
      lock.unlock();
      collective_log().mark_started(op->ticket);
      execute(*op);
      lock.lock();
      in_mpi_ = false;
      executing_ = false;
      fail_if_collective_failed_locked(*op);
    }
    if (failure_) abandon_requests_locked();
    thread_exited_ = true;
    cv_.notify_all();
    if (detached_) {
      lock.unlock();
      free_communicators();
      MpiRuntime::get().detached_thread_left_mpi();
    }
  }

  void free_communicators() {
    if (!MpiRuntime::active()) return;
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&ring_comm_);
  }

  void execute(PendingOp& op) {
    try {
      if (op.run) {
        op.run(RunContext{comm_, ring_comm_, keep_waiting_});
        op.finished.store(true, std::memory_order_release);
      } else {
        op.post(comm_, &op.request);
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

  // A failed group's posted send/recv may never complete. Receives are cancelled; every request is
  // handed back to MPI and its op (with the tensor MPI may still touch) is leaked on purpose: the
  // job is ending and freeing the buffer could let a late message write into freed memory.
  void abandon_requests_locked() {
    for (auto& op : active_) {
      if (op->run || op->finished.load() || op->request == MPI_REQUEST_NULL) continue;
      if (op->kind == OpKind::recv) MPI_Cancel(&op->request);
      MPI_Request_free(&op->request);
      op.release();
    }
    active_.clear();
  }

  // Returns true when the request completed (or failed).
  bool test_one(PendingOp& op) {
    int done = 0;
    MPI_Status status;
    try {
      BRAID_MPI_CHECK(MPI_Test(&op.request, &done, &status));
      if (done && op.check) op.check(status);
    } catch (...) {
      op.error = std::current_exception();
      done = 1;
    }
    if (done) op.finished.store(true, std::memory_order_release);
    return done != 0;
  }

  bool test_requests() {
    // Only this thread mutates active_, so it may walk it without the lock.
    bool any = false;
    for (auto& op : active_)
      if (!op->finished.load(std::memory_order_relaxed) && !op->run) any |= test_one(*op);
    return any;
  }

  // Retires every finished operation. Collectives run one at a time in issue order, so they
  // finish in that order anyway; a send or recv completes as soon as it is done, whatever was
  // posted before it (a pipeline waits for the activation it needs now while an earlier-posted
  // receive for later is still open).
  void retire_locked() {
    for (auto it = active_.begin(); it != active_.end();) {
      if (!(*it)->finished.load(std::memory_order_acquire)) {
        ++it;
        continue;
      }
      std::unique_ptr<PendingOp> op = std::move(*it);
      it = active_.erase(it);
      retire_one_locked(std::move(op));
    }
  }

  // Completes a finished operation's Work. An abandoned ring is leaked (see PendingOp).
  void retire_one_locked(std::unique_ptr<PendingOp> op) {
    if (is_collective(op->kind) && !op->error) completed_ = op->seq;
    complete_locked(*op->work, op->error, op->ticket,
                    op->error ? CollectiveStatus::failed : CollectiveStatus::done);
    if (op->abandoned) op.release();  // NOLINT(bugprone-unused-return-value): see `abandoned`
  }

  // Marks an operation taken off the queue as started, by the progress thread or a caller.
  void start_locked(PendingOp& op, bool by_caller) {
    note_who_ran_locked(op, by_caller);
    op.started = std::chrono::steady_clock::now();
    if (is_collective(op.kind)) {
      started_ = op.seq;
      started_op_ = op.kind;
    }
  }

  // After execute(): a collective that failed inside MPI leaves the members out of step for good.
  void fail_if_collective_failed_locked(const PendingOp& op) {
    if (op.error && is_collective(op.kind) && !failure_) fail_locked(op.error, 0);
  }

  void complete_locked(MpiWork& work, std::exception_ptr error, uint64_t ticket,
                       CollectiveStatus status) {
    if (work.done_) return;  // already failed with the group
    work.done_ = true;
    work.error_ = std::move(error);
    work.done_hint_.store(true, std::memory_order_release);
    collective_log().mark_finished(ticket, status);
    cv_.notify_all();
  }

  // Fails every outstanding Work. The ops stay in active_ (their tensors stay alive) since MPI may
  // still write into them.
  void fail_locked(std::exception_ptr error, uint64_t timed_out_ticket) {
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

  MPI_Comm comm_;
  MPI_Comm ring_comm_;
  const uint64_t key_;
  const std::string name_;
  const int rank_;
  const int size_;
  const std::vector<int> world_ranks_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;                     // Works completing, the progress thread exiting
  std::condition_variable queue_cv_;               // operations arriving for the progress thread
  std::deque<std::unique_ptr<PendingOp>> queue_;   // issued, not started
  std::deque<std::unique_ptr<PendingOp>> active_;  // started, not retired (issue order)
  int64_t issued_ = 0;
  int64_t started_ = 0;
  int64_t completed_ = 0;
  OpKind started_op_ = OpKind::none;
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};  // failure_ is set; read by rings without the lock
  const KeepWaiting keep_waiting_ = [this] { return !failed_.load(std::memory_order_acquire); };
  bool diagnosing_ = false;
  bool stopping_ = false;
  bool closed_ = false;
  bool in_mpi_ = false;     // inside a blocking MPI collective, which cannot be abandoned
  bool executing_ = false;  // the progress thread is running an operation
  std::unique_ptr<PendingOp> caller_op_;  // an operation running on a waiting caller's thread
  // Kinds and sizes whose last ring ran on a waiting caller's thread; see issue().
  std::unordered_set<uint64_t> claimed_by_caller_;
  bool unannounced_ = false;  // the queue holds an op the progress thread was not woken for
  std::chrono::steady_clock::time_point unannounced_since_;
  bool thread_exited_ = false;
  bool detached_ = false;
  std::thread thread_;
};

void MpiWork::wait() {
  if (!done_hint_.load(std::memory_order_acquire)) group_->run_if_next(*this);
  // Most waits come right after the issue. Yielding in a short loop first lets the progress
  // thread run and usually catches the completion without a sleep/wake round trip, which
  // otherwise costs more than the transfer itself for messages of a few MiB.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  while (!done_hint_.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < spin_until)
    std::this_thread::yield();
  std::unique_lock lock(group_->mutex_);
  group_->cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool MpiWork::is_completed() {
  std::lock_guard lock(group_->mutex_);
  return done_;
}

std::exception_ptr MpiWork::error() const {
  std::lock_guard lock(group_->mutex_);
  return error_;
}

}  // namespace detail

namespace {

using detail::comm_rank;
using detail::comm_size;
using detail::MpiRuntime;
using detail::OpKind;
using detail::PendingOp;

MPI_Comm dup_for_braid(MPI_Comm comm) {
  BRAID_CHECK(MpiRuntime::active(),
              "braid::dist::init() must run before an MPI process group is created");
  BRAID_CHECK(comm != MPI_COMM_NULL, "MpiProcessGroup needs a communicator, got MPI_COMM_NULL");
  MPI_Comm dup = MPI_COMM_NULL;
  BRAID_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  return dup;
}

std::vector<int> world_ranks_of(MPI_Comm comm) {
  MPI_Group group, world;
  BRAID_MPI_CHECK(MPI_Comm_group(comm, &group));
  BRAID_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  const int size = comm_size(comm);
  std::vector<int> ranks(size), out(size);
  for (int i = 0; i < size; ++i) ranks[i] = i;
  BRAID_MPI_CHECK(MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  for (int r : out)
    BRAID_CHECK(r != MPI_UNDEFINED,
                "MpiProcessGroup: the communicator has members outside MPI_COMM_WORLD (e.g. "
                "spawned processes), which braid does not support");
  return out;
}

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
    // Moved as raw words; reductions widen them to f32 first (widen/narrow below).
    case DType::bf16:
    case DType::f16:
      return MPI_UINT16_T;
  }
  BRAID_FAIL("dtype {} has no MPI type", static_cast<int>(t));
}

bool is_half(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

void widen(const void* data, DType t, int64_t n, float* out) {
  const auto* src = static_cast<const uint16_t*>(data);
  if (t == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(src[i]);
  }
}

void narrow(const float* values, int64_t n, DType t, void* data) {
  auto* dst = static_cast<uint16_t*>(data);
  if (t == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(values[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(values[i]);
  }
}

// f32 room for a bf16/f16 tensor's values while a ring reduces them (undefined otherwise). It is
// allocated at issue and held by the operation, so a ring that gives up leaves it alive with the
// rest of the leaked operation (MPI may still write into it).
Tensor f32_scratch(const Tensor& t, int64_t numel) {
  return is_half(t.dtype()) ? Tensor::empty({numel}, DType::f32) : Tensor();
}

template <class T>
void divide_as(void* data, int64_t n, int size) {
  auto* p = static_cast<T*>(data);
  const T divisor = static_cast<T>(size);
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / divisor);
}

void divide(void* data, DType t, int64_t n, int size) {
  switch (t) {
    case DType::f32:
      return divide_as<float>(data, n, size);
    case DType::i32:
      return divide_as<int32_t>(data, n, size);
    case DType::i64:
      return divide_as<int64_t>(data, n, size);
    case DType::u8:
      return divide_as<uint8_t>(data, n, size);
    case DType::bf16:
    case DType::f16:
      break;
  }
  BRAID_FAIL("avg of {} must be computed in f32", dtype_name(t));
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

const void* chunk_address(const Tensor& t, int parts, int index) {
  return static_cast<const char*>(t.data_ptr()) +
         chunk_offset(t.numel(), parts, index) * dtype_size(t.dtype());
}

// What a ring reads `src` from: src itself, or a copy of it when it overlaps `dst` other than
// in the one in-place layout the ring supports (mpi_ring.h).
const void* ring_source(const Tensor& src, const Tensor& dst, bool in_place,
                        std::vector<char>& copy) {
  if (in_place || !overlaps(src, dst)) return src.data_ptr();
  const auto* bytes = static_cast<const char*>(src.data_ptr());
  copy.assign(bytes, bytes + src.nbytes());
  return copy.data();
}

std::unique_ptr<PendingOp> new_op(OpKind kind, std::function<std::string()> describe,
                                  std::chrono::milliseconds t) {
  auto op = std::make_unique<PendingOp>();
  op->kind = kind;
  op->describe = std::move(describe);
  op->timeout = t;
  return op;
}

}  // namespace

// ---- MpiProcessGroup ----------------------------------------------------------------------------

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, std::string name)
    : MpiProcessGroup(Adopt{}, dup_for_braid(comm), std::move(name), default_collective_timeout()) {
}

MpiProcessGroup::MpiProcessGroup(Adopt, MPI_Comm owned, std::string name,
                                 std::chrono::milliseconds timeout)
    : ProcessGroup(std::move(name), comm_rank(owned), comm_size(owned), world_ranks_of(owned)) {
  set_timeout(timeout);
  BRAID_MPI_CHECK(MPI_Comm_set_errhandler(owned, MPI_ERRORS_RETURN));
  const std::string comm_name = "braid:" + this->name();
  MPI_Comm_set_name(owned, comm_name.c_str());
  // Every member must register the group under the same key for the control channel.
  uint64_t key = rank() == 0 ? MpiRuntime::get().new_group_key() : 0;
  BRAID_MPI_CHECK(MPI_Bcast(&key, 1, MPI_UINT64_T, 0, owned));
  // braid's ring collectives get a communicator of their own, so their point-to-point messages
  // never match the group's send/recv.
  MPI_Comm ring = MPI_COMM_NULL;
  BRAID_MPI_CHECK(MPI_Comm_dup(owned, &ring));
  BRAID_MPI_CHECK(MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN));
  state_ = std::make_shared<detail::MpiGroupState>(owned, ring, key, this->name(), rank(), size(),
                                                   world_ranks());
  MpiRuntime::get().add_group(state_);
  state_->start();
}

MpiProcessGroup::~MpiProcessGroup() {
  try {
    state_->shutdown();
  } catch (const std::exception& e) {
    log().error("destroying group '{}': {}", name(), e.what());
  }
}

MPI_Comm MpiProcessGroup::comm() const {
  return state_->comm();
}

namespace {

void check_tensor(const ProcessGroup& group, const Tensor& t, std::string_view op,
                  std::string_view what) {
  BRAID_CHECK(t.defined(), "{} on group '{}': {} is an undefined tensor", op, group.name(), what);
  BRAID_CHECK(t.device().is_cpu(),
              "{} on group '{}': {} {} is on {}, but the MPI backend handles CPU tensors only; "
              "CUDA tensors go through the NCCL backend (an NCCL process group)",
              op, group.name(), what, t.str(), t.device().str());
  BRAID_CHECK(t.is_contiguous(),
              "{} on group '{}': {} {} is not contiguous; the MPI backend needs a dense tensor "
              "(pass t.contiguous() and copy the result back)",
              op, group.name(), what, t.str());
  BRAID_CHECK(
      t.numel() <= INT_MAX,
      "{} on group '{}': {} {} has more than 2^31-1 elements, beyond one MPI call; split it", op,
      group.name(), what, t.str());
}

}  // namespace

WorkPtr MpiProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor(*this, tensor, "all_reduce", "tensor");
  auto pending = new_op(
      OpKind::all_reduce,
      [t = tensor, op] { return fmt::format("{} {}", t.str(), reduce_op_name(op)); }, timeout());
  pending->polled = true;
  pending->run = [t = tensor, wide = f32_scratch(tensor, tensor.numel()), op, size = size(),
                  rank = rank()](const detail::RunContext& ctx) {
    // A reduce_scatter into this rank's own chunk, then an all_gather of the chunks, in place.
    const bool half = is_half(t.dtype());
    if (half) widen(t.data_ptr(), t.dtype(), t.numel(), wide.data<float>());
    const Tensor& data = half ? wide : t;
    void* own = const_cast<void*>(chunk_address(data, size, rank));
    detail::ring_reduce_scatter(data.data_ptr(), own, data.numel(), data.dtype(), op, ctx.ring_comm,
                                ctx.keep_waiting);
    if (op == ReduceOp::avg) divide(own, data.dtype(), chunk_size(data.numel(), size, rank), size);
    detail::ring_all_gather(own, data.data_ptr(), data.numel(), data.dtype(), ctx.ring_comm,
                            ctx.keep_waiting);
    if (half) narrow(wide.data<float>(), t.numel(), t.dtype(), t.data_ptr());
  };
  return state_->issue(std::move(pending), tensor.dtype(), tensor.numel());
}

WorkPtr MpiProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  check_tensor(*this, input, "reduce_scatter", "input");
  check_tensor(*this, output, "reduce_scatter", "output");
  BRAID_CHECK(input.dtype() == output.dtype(),
              "reduce_scatter on group '{}': input {} and output {} differ in dtype", name(),
              input.str(), output.str());
  const int64_t total = input.numel();
  BRAID_CHECK(output.numel() == chunk_size(total, size(), rank()),
              "reduce_scatter on group '{}': rank {} must receive chunk_size({}, {}, {}) = {} "
              "elements, but output is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              output.str());
  auto pending = new_op(
      OpKind::reduce_scatter,
      [in = input, out = output, op] {
        return fmt::format("{} -> {} {}", in.str(), out.str(), reduce_op_name(op));
      },
      timeout());
  pending->polled = true;
  pending->run = [in = input, out = output, wide_in = f32_scratch(input, input.numel()),
                  wide_out = f32_scratch(output, output.numel()), op, size = size(),
                  rank = rank()](const detail::RunContext& ctx) {
    if (is_half(in.dtype())) {
      widen(in.data_ptr(), in.dtype(), in.numel(), wide_in.data<float>());
      detail::ring_reduce_scatter(wide_in.data_ptr(), wide_out.data_ptr(), in.numel(), DType::f32,
                                  op, ctx.ring_comm, ctx.keep_waiting);
      if (op == ReduceOp::avg) divide(wide_out.data_ptr(), DType::f32, out.numel(), size);
      narrow(wide_out.data<float>(), out.numel(), out.dtype(), out.data_ptr());
      return;
    }
    std::vector<char> copy;
    const bool in_place = out.data_ptr() == chunk_address(in, size, rank);
    detail::ring_reduce_scatter(ring_source(in, out, in_place, copy), out.data_ptr(), in.numel(),
                                in.dtype(), op, ctx.ring_comm, ctx.keep_waiting);
    if (op == ReduceOp::avg) divide(out.data_ptr(), out.dtype(), out.numel(), size);
  };
  return state_->issue(std::move(pending), input.dtype(), total);
}

WorkPtr MpiProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  check_tensor(*this, input, "all_gather", "input");
  check_tensor(*this, output, "all_gather", "output");
  BRAID_CHECK(input.dtype() == output.dtype(),
              "all_gather on group '{}': input {} and output {} differ in dtype", name(),
              input.str(), output.str());
  const int64_t total = output.numel();
  BRAID_CHECK(input.numel() == chunk_size(total, size(), rank()),
              "all_gather on group '{}': rank {} must contribute chunk_size({}, {}, {}) = {} "
              "elements, but input is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              input.str());
  auto pending = new_op(
      OpKind::all_gather,
      [in = input, out = output] { return fmt::format("{} -> {}", in.str(), out.str()); },
      timeout());
  pending->polled = true;
  pending->run = [in = input, out = output, size = size(),
                  rank = rank()](const detail::RunContext& ctx) {
    std::vector<char> copy;
    const bool in_place = in.data_ptr() == chunk_address(out, size, rank);
    detail::ring_all_gather(ring_source(in, out, in_place, copy), out.data_ptr(), out.numel(),
                            in.dtype(), ctx.ring_comm, ctx.keep_waiting);
  };
  return state_->issue(std::move(pending), input.dtype(), total);
}

WorkPtr MpiProcessGroup::broadcast(Tensor& tensor, int root) {
  check_tensor(*this, tensor, "broadcast", "tensor");
  BRAID_CHECK(root >= 0 && root < size(),
              "broadcast on group '{}': root {} is not a rank of a group of size {}", name(), root,
              size());
  auto pending = new_op(
      OpKind::broadcast,
      [t = tensor, root] { return fmt::format("{} from rank {}", t.str(), root); }, timeout());
  pending->run = [t = tensor, root](const detail::RunContext& ctx) {
    BRAID_MPI_CHECK(MPI_Bcast(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()),
                              root, ctx.comm));
  };
  return state_->issue(std::move(pending), tensor.dtype(), tensor.numel());
}

namespace {

void check_peer(const ProcessGroup& group, std::string_view op, int peer, int tag) {
  BRAID_CHECK(peer >= 0 && peer < group.size(),
              "{} on group '{}': peer {} is not a rank of a group of size {}", op, group.name(),
              peer, group.size());
  // MPI attaches the tag bound to MPI_COMM_WORLD; it holds for every communicator.
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  const int max_tag = found && tag_ub ? *tag_ub : 32767;
  BRAID_CHECK(tag >= 0 && tag <= max_tag, "{} on group '{}': tag {} is outside [0, {}]", op,
              group.name(), tag, max_tag);
}

}  // namespace

WorkPtr MpiProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_tensor(*this, tensor, "send", "tensor");
  check_peer(*this, "send", dst, tag);
  auto pending = new_op(
      OpKind::send, [t = tensor] { return t.str(); }, timeout());
  pending->peer = dst;
  pending->tag = tag;
  pending->post = [t = tensor, dst, tag](MPI_Comm comm, MPI_Request* request) {
    BRAID_MPI_CHECK(MPI_Isend(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()),
                              dst, tag, comm, request));
  };
  return state_->issue(std::move(pending), tensor.dtype(), tensor.numel());
}

WorkPtr MpiProcessGroup::recv(Tensor& tensor, int src, int tag) {
  check_tensor(*this, tensor, "recv", "tensor");
  check_peer(*this, "recv", src, tag);
  auto pending = new_op(
      OpKind::recv, [t = tensor] { return t.str(); }, timeout());
  pending->peer = src;
  pending->tag = tag;
  pending->post = [t = tensor, src, tag](MPI_Comm comm, MPI_Request* request) {
    BRAID_MPI_CHECK(MPI_Irecv(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()),
                              src, tag, comm, request));
  };
  pending->check = [t = tensor, src, tag, group = name()](const MPI_Status& status) {
    int count = 0;
    MPI_Status copy = status;
    BRAID_MPI_CHECK(MPI_Get_count(&copy, mpi_datatype(t.dtype()), &count));
    BRAID_CHECK(count == t.numel(),
                "recv on group '{}' from rank {} tag {}: got {} elements, expected {} ({})", group,
                src, tag, count, t.numel(), t.str());
  };
  return state_->issue(std::move(pending), tensor.dtype(), tensor.numel());
}

WorkPtr MpiProcessGroup::barrier() {
  auto pending = new_op(
      OpKind::barrier, [] { return std::string("-"); }, timeout());
  pending->run = [](const detail::RunContext& ctx) { BRAID_MPI_CHECK(MPI_Barrier(ctx.comm)); };
  return state_->issue(std::move(pending), DType::u8, 0);
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::split_by_color(int color, int key,
                                                              std::string name) {
  auto result = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  auto pending = new_op(
      OpKind::split,
      [name, color, key] { return fmt::format("'{}' color {} key {}", name, color, key); },
      timeout());
  // MPI_UNDEFINED makes MPI_Comm_split return MPI_COMM_NULL for ranks joining no group.
  pending->run = [result, color = color < 0 ? MPI_UNDEFINED : color,
                  key](const detail::RunContext& ctx) {
    BRAID_MPI_CHECK(MPI_Comm_split(ctx.comm, color, key, result.get()));
  };
  state_->issue(std::move(pending), DType::i32, 1)->wait();
  if (*result == MPI_COMM_NULL) return nullptr;
  return std::shared_ptr<MpiProcessGroup>(
      new MpiProcessGroup(Adopt{}, *result, std::move(name), timeout()));
}

}  // namespace braid::dist
