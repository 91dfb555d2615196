// The operation queue and watchdog shared by every process-group backend (internal): sequence
// numbers, the collective log, in-order starts, Works, timeouts diagnosed over the control
// channel, and failing a group once. A backend supplies only the transport: per operation, what
// to launch and how to tell that it finished (EngineOp).
//
// Two ways to launch, chosen per operation:
// - `run`: the engine's progress thread (or a caller waiting for it, when `polled`) runs it to
//   completion, one at a time in issue order (MPI's rings and blocking MPI calls).
// - `post` + `test`: `post` starts it without waiting for the peers and `test` is polled until it
//   says done (MPI's Isend/Irecv; NCCL's enqueue on a stream, finished when its event is). With
//   `post_at_issue` the post runs inside issue() on the caller's thread, so it captures what the
//   caller issued before (NCCL: an event on the caller's stream).
// Collectives start in issue order; a send or recv completes on its own (process_group.h).
//
// Timeouts: with MPI up, the control thread (mpi_runtime.h) watches the engine as a
// MonitoredGroup and asks the peers where they are, so the error names the ranks that never
// joined. Without MPI (a group bootstrapped over a SoloProcessGroup) the progress thread checks
// deadlines itself and the message says that no peer was asked.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "braid/core/dtype.h"
#include "braid/dist/collective_log.h"
#include "braid/dist/process_group.h"
#include "dist/mpi_ring.h"
#include "dist/mpi_runtime.h"

namespace braid::dist::detail {

class EngineWork;

// One operation: the transport's part (filled by the backend) and the engine's bookkeeping.
struct EngineOp {
  // ---- set by the backend --------------------------------------------------------------------
  OpKind kind = OpKind::none;
  int peer = -1;  // send/recv: the other side's group rank
  int tag = 0;
  DType dtype = DType::u8;  // for the collective log
  int64_t numel = 0;
  // What the op moves, in words, for a diagnosis. Built only when one is made: formatting at
  // issue costs a few us of a small transfer.
  std::function<std::string()> describe;
  std::chrono::milliseconds timeout{0};
  // Runs the op to completion. keep_waiting() turns false once the group failed; a `polled` run
  // then gives up (throws), so it may also run on a waiting caller's thread.
  std::function<void(const KeepWaiting&)> run;
  bool polled = false;
  // Or: starts the op, and reports when it finished (true) or failed (throws).
  std::function<void(const KeepWaiting&)> post;
  std::function<bool(const EngineOp& self)> test;
  bool post_at_issue = false;
  // Posted ops whose transport queues them behind earlier work (a stream): true once the
  // transport reached the op; its timeout clock starts then. Null: the clock starts at the post.
  std::function<bool()> reached;
  // A posted op left unfinished when the group fails (MPI: cancel and free its request). The op
  // is then leaked with its tensors: the transport may still write into them.
  std::function<void()> abandon;
  // An error of this op fails the whole group (collectives: the members are out of step).
  bool error_fails_group = false;

  // ---- the engine's ------------------------------------------------------------------------
  int64_t seq = 0;
  uint64_t pattern = 0;  // kind and size: operations alike in both are assumed used alike
  std::shared_ptr<EngineWork> work;
  uint64_t ticket = 0;
  // started is written once, before clock_running is set; the watchdog reads it after.
  std::chrono::steady_clock::time_point started;
  std::atomic<bool> clock_running{false};
  std::atomic<bool> posted{false};  // post() returned: test() may be polled
  std::atomic<bool> finished{false};
  std::exception_ptr error;  // set before `finished`
  bool abandoned = false;    // a run that gave up: leaked, never freed
};

struct EngineConfig {
  std::string name;
  std::string backend;  // "mpi", "nccl": in diagnoses
  uint64_t key = 0;     // the same on every member (the control channel's group key)
  int rank = 0;
  int size = 1;
  std::vector<int> world_ranks;
  const char* thread_name = "braid-pg";
  // Called once, outside the engine's locks, right after the group failed (NCCL: abort the
  // communicator so its kernels return); `logged`: a diagnosed timeout already wrote the error
  // and the collective log to the log.
  std::function<void(const std::exception_ptr& error, bool logged)> on_failure;
  // Frees the transport once no thread can use it any more (MPI: the communicators).
  std::function<void()> release;
  // Destroy retired ops (and the tensors they hold) on the next issuing or draining thread,
  // not the progress thread (a device free may wait for the whole device).
  bool release_on_caller = false;
};

class OpEngine final : public MonitoredGroup, public std::enable_shared_from_this<OpEngine> {
 public:
  // Starts the progress thread and registers with the control channel when MPI is up.
  static std::shared_ptr<OpEngine> start(EngineConfig config);
  ~OpEngine() override;

  const std::string& name() const { return config_.name; }
  // Numbers, logs and queues `op` (or posts it, post_at_issue). On a failed group the Work holds
  // the group's error at once.
  std::shared_ptr<EngineWork> issue(std::unique_ptr<EngineOp> op);
  // Blocks until every op issued so far retired; throws the group's error if it failed.
  void drain();
  std::exception_ptr failure() const;

  // ---- MonitoredGroup ------------------------------------------------------------------------
  uint64_t key() const override { return config_.key; }
  SeqState seq_state() const override;
  std::optional<StuckOp> take_expired(std::chrono::steady_clock::time_point now) override;
  void fail_expired(const StuckOp& stuck, const std::string& message) override;
  void nudge(std::chrono::steady_clock::time_point now) override;
  void shutdown() override;

 private:
  friend class EngineWork;
  explicit OpEngine(EngineConfig config);

  void progress();
  void run_if_next(const EngineWork& work);
  void execute(EngineOp& op);
  std::exception_ptr try_post(EngineOp& op);
  bool test_one(EngineOp& op);
  bool test_posted();
  void check_deadlines();
  void abandon_posted_locked();
  void retire_locked();
  void retire_one_locked(std::unique_ptr<EngineOp> op);
  void trace_locked(const EngineOp& op);
  void start_locked(EngineOp& op, bool by_caller);
  void note_who_ran_locked(const EngineOp& op, bool caller);
  bool may_start_next_locked() const { return !queue_.empty() && !caller_op_; }
  void fail_if_group_error_locked(const EngineOp& op);
  void complete_locked(EngineWork& work, std::exception_ptr error, uint64_t ticket,
                       CollectiveStatus status);
  void fail_locked(std::exception_ptr error, uint64_t timed_out_ticket);
  void after_failure();
  void release_retired();

  const EngineConfig config_;
  bool monitored_ = false;  // the control channel watches this engine

  mutable std::mutex mutex_;
  std::condition_variable cv_;                      // Works completing, the progress thread exiting
  std::condition_variable queue_cv_;                // ops arriving for the progress thread
  std::deque<std::unique_ptr<EngineOp>> queue_;     // issued `run` ops, not started
  std::deque<std::unique_ptr<EngineOp>> active_;    // started, not retired (issue order)
  std::vector<EngineOp*> polling_;                  // progress thread only: posted ops to test
  std::vector<std::unique_ptr<EngineOp>> retired_;  // release_on_caller: to destroy on a caller
  std::mutex post_mutex_;  // post_at_issue: one post at a time, in issue order
  int64_t issued_ = 0;
  int64_t started_ = 0;
  int64_t completed_ = 0;
  OpKind started_op_ = OpKind::none;
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};  // failure_ is set; read by rings without the lock
  bool failure_handled_ = false;     // on_failure ran (or is running)
  bool failure_logged_ = false;      // fail_expired wrote it to the log
  const KeepWaiting keep_waiting_ = [this] { return !failed_.load(std::memory_order_acquire); };
  bool diagnosing_ = false;
  bool stopping_ = false;
  bool closed_ = false;
  bool in_blocking_run_ = false;         // inside a run that cannot give up (a blocking MPI call)
  bool executing_ = false;               // the progress thread is running an op
  std::unique_ptr<EngineOp> caller_op_;  // an op running on a waiting caller's thread
  std::unordered_set<uint64_t> claimed_by_caller_;  // see issue()
  bool unannounced_ = false;  // the queue holds an op the progress thread was not woken for
  std::chrono::steady_clock::time_point unannounced_since_;
  bool thread_exited_ = false;
  std::chrono::steady_clock::time_point traced_until_{};  // the last traced collective's end
  bool detached_ = false;
  std::thread thread_;
};

// The host side of an engine op's completion. Backends hand it out as is (MPI) or wrap it
// (NCCL's Work orders the caller's stream instead of blocking).
class EngineWork final : public Work {
 public:
  explicit EngineWork(std::shared_ptr<OpEngine> engine) : engine_(std::move(engine)) {}
  // Blocks the host until the op retired or the group failed.
  void wait() override;
  bool is_completed() override;
  std::exception_ptr error() const override;

 private:
  friend class OpEngine;
  std::shared_ptr<OpEngine> engine_;
  // Guarded by the engine's mutex.
  bool done_ = false;
  std::exception_ptr error_;
  // Mirrors done_ for wait()'s lock-free spin; set after done_, under the same mutex.
  std::atomic<bool> done_hint_{false};
};

}  // namespace braid::dist::detail
