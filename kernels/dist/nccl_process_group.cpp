// NcclProcessGroup: communicator set-up over MPI, one launch helper doing the stream/event/log
// bookkeeping for every operation, and a watchdog thread retiring, timing out and failing them.
#include "dist/nccl_process_group.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>
#include <pthread.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "braid/core/logging.h"
#include "braid/dist/collective_log.h"
#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "dist/nccl_support.h"

namespace braid::dist {
namespace detail {

using Clock = std::chrono::steady_clock;
using nccl::finish_call;

// How often the watchdog looks at outstanding operations: retiring them releases their tensors
// and is what NcclProcessGroup::synchronize() waits for, so it stays short.
constexpr auto kWatchInterval = std::chrono::milliseconds(1);

// A CUDA event shared by an operation and its Work: wait() may still need it after the watchdog
// retired the operation.
using EventPtr = std::shared_ptr<CUevent_st>;

EventPtr make_event() {
  cudaEvent_t event = nullptr;
  BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return EventPtr(event, [](cudaEvent_t e) { (void)cudaEventDestroy(e); });
}

// cudaEventQuery; "not ready" is an answer, not an error, and must not linger as the thread's
// last error, where the next kernel launch check (cudaGetLastError) would report it.
cudaError_t query_event(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady)
    (void)cudaGetLastError();
  return status;
}

// What launches an operation: NCCL calls (each through finish_call with `deadline`) and staging
// copies, all on `stream`.
using Launch =
    std::function<void(ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline)>;

struct OpSpec {
  std::string_view op;  // "all_reduce", ...
  bool collective = true;
  int peer = -1;
  std::string detail;
  DType dtype = DType::u8;
  int64_t numel = 0;
  std::vector<StoragePtr> keep_alive;
  std::chrono::milliseconds timeout{0};
  bool blocking_wait = false;  // barrier: wait() blocks the host
};

class NcclWorkImpl;

// One launched operation, from launch to retirement (or to the group's failure).
struct NcclOp {
  std::string op;
  int64_t seq = 0;
  int peer = -1;
  std::string detail;
  std::chrono::milliseconds timeout{0};
  EventPtr start;  // recorded on the group's stream before the operation
  EventPtr done;   // recorded after it
  std::vector<StoragePtr> keep_alive;
  // Weak: a Work the caller dropped needs no completion, and a strong reference would make
  // state -> op -> work -> state a cycle.
  std::weak_ptr<NcclWorkImpl> work;
  uint64_t ticket = 0;
  // Watchdog only: when it saw `start` complete, i.e. the stream reached the operation.
  bool started = false;
  Clock::time_point started_at;
};

class NcclGroupState;

class NcclWorkImpl final : public NcclWork {
 public:
  NcclWorkImpl(std::shared_ptr<NcclGroupState> group, bool blocking_wait)
      : group_(std::move(group)), blocking_wait_(blocking_wait) {}
  void wait() override;
  bool is_completed() override;
  std::exception_ptr error() const override;
  void synchronize() override;

 private:
  friend class NcclGroupState;
  std::shared_ptr<NcclGroupState> group_;
  const bool blocking_wait_;
  EventPtr done_event_;  // set before the Work is handed out; null when it failed at issue
  // Guarded by the group's mutex.
  bool done_ = false;
  std::exception_ptr error_;
};

class NcclGroupState final : public std::enable_shared_from_this<NcclGroupState> {
 public:
  // Takes ownership of `comm` (aborting it when the set-up below fails).
  static std::shared_ptr<NcclGroupState> create(ncclComm_t comm, int device, std::string name,
                                                int rank, int size,
                                                std::chrono::milliseconds timeout) {
    cudaStream_t stream = nullptr;
    void* barrier = nullptr;
    try {
      cuda::DeviceGuard guard(device);
      // Non-blocking: no implicit ordering with the legacy default stream braid computes on;
      // the events of launch() order the two explicitly, so communication overlaps compute.
      BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      // barrier() sums this zero in place forever, so it stays zero.
      BRAID_CUDA_CHECK(cudaMalloc(&barrier, sizeof(int32_t)));
      BRAID_CUDA_CHECK(cudaMemset(barrier, 0, sizeof(int32_t)));
    } catch (...) {
      if (barrier != nullptr) (void)cudaFree(barrier);
      if (stream != nullptr) (void)cudaStreamDestroy(stream);
      (void)ncclCommAbort(comm);
      throw;
    }
    auto state = std::shared_ptr<NcclGroupState>(
        new NcclGroupState(comm, stream, barrier, device, std::move(name), rank, size, timeout));
    state->thread_ = std::thread([raw = state.get()] { raw->watch(); });
    return state;
  }

  ~NcclGroupState() {
    try {
      shutdown(shutdown_timeout_);
    } catch (const std::exception& e) {
      log().error("releasing NCCL group '{}': {}", name_, e.what());
    }
  }

  int device() const { return device_; }
  const std::string& name() const { return name_; }
  void* barrier_buffer() const { return barrier_; }

  // The one helper every operation goes through: sequence number and collective-log record,
  // the compute-stream -> group-stream event, the start/done events, the launch itself, and
  // handing the operation to the watchdog. A failure here fails the group (the peers may have
  // launched their side, so the ranks are out of step).
  WorkPtr launch(OpSpec spec, const Launch& body) {
    release_retired();
    auto work = std::make_shared<NcclWorkImpl>(shared_from_this(), spec.blocking_wait);
    auto op = std::make_unique<NcclOp>();
    op->op = std::string(spec.op);
    op->peer = spec.peer;
    op->detail = std::move(spec.detail);
    op->timeout = spec.timeout;
    op->keep_alive = std::move(spec.keep_alive);
    op->work = work;
    {
      std::lock_guard lock(mutex_);
      BRAID_CHECK(!stopping_, "group '{}' was destroyed; {} cannot run on it", name_, spec.op);
      if (spec.collective) op->seq = ++issued_;
      CollectiveRecord record;
      record.group = name_;
      record.op = op->op;
      record.seq = op->seq;
      record.peer = op->peer;
      record.dtype = spec.dtype;
      record.numel = spec.numel;
      record.issued = std::chrono::system_clock::now();
      op->ticket = collective_log().add(std::move(record));
      if (failure_) {
        complete_locked(op->work, failure_, op->ticket, CollectiveStatus::failed);
        return work;
      }
    }
    try {
      cuda::DeviceGuard guard(device_);
      EventPtr ready = make_event();
      BRAID_CUDA_CHECK(cudaEventRecord(ready.get(), cuda::current_stream()));
      BRAID_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.get(), 0));
      op->start = make_event();
      op->done = make_event();
      BRAID_CUDA_CHECK(cudaEventRecord(op->start.get(), stream_));
      collective_log().mark_started(op->ticket);
      {
        std::lock_guard comm_lock(comm_mutex_);
        BRAID_CHECK(comm_ != nullptr, "the communicator was aborted");
        body(comm_, stream_, Clock::now() + op->timeout);
      }
      BRAID_CUDA_CHECK(cudaEventRecord(op->done.get(), stream_));
    } catch (const std::exception& e) {
      const std::string message =
          fmt::format("group '{}' (nccl, {} ranks) could not launch {} on rank {} (cuda:{}): {}",
                      name_, size_, describe(*op), rank_, device_, e.what());
      fail(message, op->ticket, CollectiveStatus::failed);
      std::lock_guard lock(mutex_);
      complete_locked(op->work, failure_ ? failure_ : std::make_exception_ptr(Error(message)),
                      op->ticket, CollectiveStatus::failed);
      abandoned_.push_back(std::move(op));
      return work;
    }
    work->done_event_ = op->done;
    std::lock_guard lock(mutex_);
    if (failure_) {  // failed while this one launched: it may never complete
      complete_locked(op->work, failure_, op->ticket, CollectiveStatus::failed);
      abandoned_.push_back(std::move(op));
      return work;
    }
    outstanding_.push_back(std::move(op));
    watch_cv_.notify_one();
    return work;
  }

  // ncclCommSplit of this group's communicator, run as one of its collectives. color < 0: this
  // rank joins no group (NCCL_SPLIT_NOCOLOR) and gets nullptr.
  ncclComm_t split(int color, int key, const std::string& new_name,
                   std::chrono::milliseconds timeout) {
#if BRAID_NCCL_HAS_COMM_SPLIT
    uint64_t ticket = 0;
    int64_t seq = 0;
    {
      std::lock_guard lock(mutex_);
      BRAID_CHECK(!stopping_, "group '{}' was destroyed; split cannot run on it", name_);
      if (failure_) std::rethrow_exception(failure_);
      seq = ++issued_;
      CollectiveRecord record;
      record.group = name_;
      record.op = "split";
      record.seq = seq;
      record.dtype = DType::i32;
      record.numel = 1;
      record.issued = std::chrono::system_clock::now();
      ticket = collective_log().add(std::move(record));
    }
    collective_log().mark_started(ticket);
    ncclComm_t child = nullptr;
    try {
      cuda::DeviceGuard guard(device_);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      const auto deadline = Clock::now() + timeout;
      std::lock_guard comm_lock(comm_mutex_);
      BRAID_CHECK(comm_ != nullptr, "the communicator was aborted");
      const ncclResult_t result =
          ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
      // Non-blocking: the parent reports the call's progress, the child its own set-up.
      finish_call(comm_, result, "ncclCommSplit", deadline);
      if (child != nullptr)
        finish_call(child, ncclInProgress, "ncclCommSplit (new communicator)", deadline);
    } catch (const std::exception& e) {
      if (child != nullptr) (void)ncclCommAbort(child);
      const std::string message = fmt::format(
          "group '{}' (nccl, {} ranks) split seq {} into '{}' failed on rank {} (cuda:{}): {}",
          name_, size_, seq, new_name, rank_, device_, e.what());
      fail(message, ticket, CollectiveStatus::failed);
      throw Error(message);
    }
    collective_log().mark_finished(ticket, CollectiveStatus::done);
    return child;
#else
    (void)color, (void)key, (void)new_name, (void)timeout;
    BRAID_FAIL("ncclCommSplit needs NCCL >= 2.18");
#endif
  }

  // Blocks until every launched operation retired, then throws the group's error if any.
  void synchronize() {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return outstanding_.empty() || failure_; });
      if (failure_) std::rethrow_exception(failure_);
    }
    release_retired();
  }

  // Lets the outstanding operations finish or time out, stops the watchdog and releases the
  // communicator, the stream and the barrier buffer. Idempotent.
  void shutdown(std::chrono::milliseconds timeout) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;
      stopping_ = true;
      watch_cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();  // after outstanding_ drained, each op bounded
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    release_retired();
    const int previous = current_device();
    if (previous != device_) (void)cudaSetDevice(device_);
    {
      std::lock_guard comm_lock(comm_mutex_);
      if (comm_ != nullptr) {
        // Finalize flushes what NCCL still holds (and may wait for the peers to do the same);
        // a peer that never destroys its side would hold us forever, hence the timeout + abort.
        try {
          finish_call(comm_, ncclCommFinalize(comm_), "ncclCommFinalize", Clock::now() + timeout);
          const ncclResult_t destroyed = ncclCommDestroy(comm_);
          if (destroyed != ncclSuccess && destroyed != ncclInProgress)
            log().warn("group '{}': ncclCommDestroy: {}", name_, nccl::describe_status(destroyed));
        } catch (const std::exception& e) {
          log().warn("group '{}': {}; aborting the communicator instead", name_, e.what());
          (void)ncclCommAbort(comm_);
        }
        comm_ = nullptr;
      }
    }
    // Errors are dropped (and cleared): this also runs at exit, possibly after the runtime has
    // begun unloading.
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    if (barrier_ != nullptr) (void)cudaFree(barrier_);
    stream_ = nullptr;
    barrier_ = nullptr;
    (void)cudaGetLastError();
    if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
  }

 private:
  friend class NcclWorkImpl;

  NcclGroupState(ncclComm_t comm, cudaStream_t stream, void* barrier, int device, std::string name,
                 int rank, int size, std::chrono::milliseconds timeout)
      : comm_(comm),
        stream_(stream),
        barrier_(barrier),
        device_(device),
        name_(std::move(name)),
        rank_(rank),
        size_(size),
        shutdown_timeout_(timeout) {}

  static int current_device() {
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return device;
  }

  static std::string describe(const NcclOp& op) {
    if (op.seq == 0) return fmt::format("{} (peer {}, {})", op.op, op.peer, op.detail);
    return fmt::format("{} seq {} ({})", op.op, op.seq, op.detail);
  }

  nccl::FailedOp failed_op(const NcclOp& op, Clock::time_point now) const {
    nccl::FailedOp f;
    f.group = name_;
    f.size = size_;
    f.rank = rank_;
    f.device = device_;
    f.op = op.op;
    f.seq = op.seq;
    f.peer = op.peer;
    f.detail = op.detail;
    f.timeout_s = op.timeout.count() / 1000.0;
    f.elapsed_s = op.started ? std::chrono::duration<double>(now - op.started_at).count() : -1.0;
    return f;
  }

  // ---- the watchdog ---------------------------------------------------------------------------

  void watch() {
    pthread_setname_np(pthread_self(), "braid-nccl-wd");
    (void)cudaSetDevice(device_);  // event queries and ncclCommAbort act on the group's device
    std::unique_lock lock(mutex_);
    for (;;) {
      if (outstanding_.empty()) {
        if (stopping_) break;
        watch_cv_.wait(lock, [&] { return !outstanding_.empty() || stopping_; });
        continue;
      }
      // Only this thread removes operations and the objects never move, so the pointers stay
      // valid after the lock is dropped (a failure moves them to abandoned_, still alive).
      std::vector<NcclOp*> ops;
      ops.reserve(outstanding_.size());
      for (const auto& op : outstanding_) ops.push_back(op.get());
      lock.unlock();
      poll(ops);
      lock.lock();
      if (!outstanding_.empty()) watch_cv_.wait_for(lock, kWatchInterval);
    }
  }

  void poll(const std::vector<NcclOp*>& ops) {
    const Clock::time_point now = Clock::now();
    // The stream runs the operations in order, so they complete in order.
    size_t finished = 0;
    for (NcclOp* op : ops) {
      const cudaError_t status = query_event(op->done.get());
      if (status == cudaErrorNotReady) break;
      if (status != cudaSuccess) {
        (void)cudaGetLastError();
        fail(nccl::async_error_message(failed_op(*op, now),
                                       "CUDA error " + cuda::describe_status(status)),
             op->ticket, CollectiveStatus::failed);
        return;
      }
      ++finished;
    }
    retire(ops, finished);
    if (finished == ops.size()) return;
    NcclOp& oldest = *ops[finished];
    if (!oldest.started) {
      const cudaError_t status = query_event(oldest.start.get());
      if (status == cudaSuccess) {
        oldest.started = true;
        oldest.started_at = now;
      }
    }
    // Asynchronous NCCL errors (a peer that died, a network failure). try_lock: a launch holding
    // the communicator is never waited for; the next round asks again.
    std::string async_error;
    {
      std::unique_lock comm_lock(comm_mutex_, std::try_to_lock);
      if (comm_lock.owns_lock() && comm_ != nullptr) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
        if (query != ncclSuccess) state = query;
        if (state != ncclSuccess && state != ncclInProgress) {
          const char* last = ncclGetLastError(comm_);
          async_error = "NCCL error " + nccl::describe_status(state);
          if (last != nullptr && *last != '\0') async_error += fmt::format(" ({})", last);
        }
      }
    }
    if (!async_error.empty()) {
      fail(nccl::async_error_message(failed_op(oldest, now), async_error), oldest.ticket,
           CollectiveStatus::failed);
      return;
    }
    if (oldest.started && now - oldest.started_at > oldest.timeout)
      fail(nccl::timeout_message(failed_op(oldest, now)), oldest.ticket,
           CollectiveStatus::timed_out);
  }

  // Completes the first `count` of `ops` (still at the front of outstanding_ unless the group
  // failed meanwhile). Their storages go to retired_, released by the caller's thread: dropping a
  // cuda Storage calls cudaFree, which waits for the whole device, and the watchdog must never
  // wait behind a hung NCCL kernel it is supposed to time out.
  void retire(const std::vector<NcclOp*>& ops, size_t count) {
    if (count == 0) return;
    std::vector<std::unique_ptr<NcclOp>> done;
    {
      std::lock_guard lock(mutex_);
      for (size_t i = 0; i < count; ++i) {
        if (outstanding_.empty() || outstanding_.front().get() != ops[i]) break;
        std::unique_ptr<NcclOp> op = std::move(outstanding_.front());
        outstanding_.pop_front();
        complete_locked(op->work, nullptr, op->ticket, CollectiveStatus::done);
        for (auto& storage : op->keep_alive) retired_.push_back(std::move(storage));
        done.push_back(std::move(op));
      }
    }
    // The ops' events are destroyed here, outside the lock (cudaEventDestroy does not wait).
  }

  // Drops the storages of retired operations on the calling (user) thread.
  void release_retired() {
    std::vector<StoragePtr> released;
    {
      std::lock_guard lock(mutex_);
      released.swap(retired_);
    }
  }

  void complete_locked(const std::weak_ptr<NcclWorkImpl>& weak, std::exception_ptr error,
                       uint64_t ticket, CollectiveStatus status) {
    std::shared_ptr<NcclWorkImpl> work = weak.lock();
    if (work && work->done_) return;  // already failed with the group
    collective_log().mark_finished(ticket, status);
    if (work) {
      work->done_ = true;
      work->error_ = std::move(error);
    }
    cv_.notify_all();
  }

  // Fails the group once: logs `message` and the collective log, fails every outstanding Work,
  // then aborts the communicator (which makes NCCL's kernels return). The failed operations'
  // storages stay alive in abandoned_ until the state goes away, since the aborted kernels may
  // have touched them until the abort.
  void fail(const std::string& message, uint64_t ticket, CollectiveStatus status) {
    {
      std::lock_guard lock(mutex_);
      if (failure_ || failing_) return;
      failing_ = true;
    }
    // Logged before any waiter is woken: the waiter typically ends the job at once.
    log().error("{}", message);
    collective_log().mark_finished(ticket, status);
    collective_log().dump_to_log(fmt::format("group '{}' (nccl) failed", name_));
    {
      std::lock_guard lock(mutex_);
      failure_ = std::make_exception_ptr(Error(message));
      for (auto& op : outstanding_) {
        complete_locked(op->work, failure_, op->ticket,
                        op->ticket == ticket ? status : CollectiveStatus::failed);
        abandoned_.push_back(std::move(op));
      }
      outstanding_.clear();
      cv_.notify_all();
    }
    std::lock_guard comm_lock(comm_mutex_);
    if (comm_ != nullptr) {
      // In non-blocking mode the abort may answer ncclInProgress; the handle is gone either way.
      const ncclResult_t aborted = ncclCommAbort(comm_);
      if (aborted != ncclSuccess && aborted != ncclInProgress)
        log().warn("group '{}': ncclCommAbort: {}", name_, nccl::describe_status(aborted));
      comm_ = nullptr;
    }
  }

  // Guards comm_ and every NCCL call on it (launches, split, abort). Never taken while holding
  // mutex_.
  std::mutex comm_mutex_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  void* barrier_;
  const int device_;
  const std::string name_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds shutdown_timeout_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;        // Works completing or failing
  std::condition_variable watch_cv_;  // operations arriving for the watchdog, shutdown
  std::deque<std::unique_ptr<NcclOp>> outstanding_;  // launched, not retired (in issue order)
  std::vector<std::unique_ptr<NcclOp>> abandoned_;   // failed with the group
  std::vector<StoragePtr> retired_;                  // to be released by the user's thread
  int64_t issued_ = 0;
  std::exception_ptr failure_;
  bool failing_ = false;
  bool stopping_ = false;
  bool closed_ = false;
  std::thread thread_;
};

void NcclWorkImpl::wait() {
  {
    std::lock_guard lock(group_->mutex_);
    if (error_) std::rethrow_exception(error_);
    if (done_ && !blocking_wait_) return;
  }
  if (blocking_wait_) return synchronize();
  cuda::DeviceGuard guard(group_->device());
  BRAID_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done_event_.get(), 0));
  std::lock_guard lock(group_->mutex_);
  if (error_) std::rethrow_exception(error_);
}

bool NcclWorkImpl::is_completed() {
  {
    std::lock_guard lock(group_->mutex_);
    if (done_) return true;
  }
  return done_event_ && query_event(done_event_.get()) == cudaSuccess;
}

std::exception_ptr NcclWorkImpl::error() const {
  std::lock_guard lock(group_->mutex_);
  return error_;
}

void NcclWorkImpl::synchronize() {
  // Polls the event itself (fast completion) and sleeps on the group's condition variable in
  // between, where a failure wakes it; the watchdog bounds a hang by the group's timeout.
  auto pause = std::chrono::microseconds(2);
  std::unique_lock lock(group_->mutex_);
  for (;;) {
    if (error_) std::rethrow_exception(error_);
    if (done_) return;
    lock.unlock();
    const bool finished = done_event_ && query_event(done_event_.get()) == cudaSuccess;
    lock.lock();
    if (finished) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
    group_->cv_.wait_for(lock, pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

}  // namespace detail

namespace {

using detail::Clock;
using detail::OpSpec;
using nccl::finish_call;

// Rank 0 draws the id and broadcasts it over the bootstrap group. A leading status byte lets the
// other ranks fail at once when rank 0 could not draw one, instead of waiting for a communicator
// that will never form.
ncclUniqueId exchange_unique_id(ProcessGroup& bootstrap, const std::string& name) {
  Tensor buffer = Tensor::zeros({1 + static_cast<int64_t>(sizeof(ncclUniqueId))}, DType::u8);
  auto* bytes = buffer.data<uint8_t>();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::string error;
  if (bootstrap.rank() == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result == ncclSuccess) {
      bytes[0] = 1;
      std::memcpy(bytes + 1, &id, sizeof(id));
    } else {
      error = nccl::describe_status(result);
    }
  }
  bootstrap.broadcast(buffer, 0)->wait();
  BRAID_CHECK(error.empty(), "ncclGetUniqueId for group '{}' failed: {}", name, error);
  BRAID_CHECK(bytes[0] == 1,
              "group '{}': rank 0 of '{}' could not draw the NCCL unique id (its log says why)",
              name, bootstrap.name());
  std::memcpy(&id, bytes + 1, sizeof(id));
  return id;
}

ncclComm_t init_communicator(const ncclUniqueId& id, const ProcessGroup& bootstrap, int device,
                             const std::string& name) {
  const auto timeout = bootstrap.timeout();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; polled below so a missing rank cannot hang us
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  try {
    finish_call(comm, result, "ncclCommInitRankConfig", Clock::now() + timeout);
  } catch (const std::exception& e) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    BRAID_FAIL(
        "NCCL communicator of group '{}' ({} ranks; this is rank {} on cuda:{}) could not be "
        "created (timeout {:.1f}s): {}. Every rank of '{}' must call NcclProcessGroup::create, "
        "each on its own device; NCCL_DEBUG=INFO shows how far set-up got",
        name, bootstrap.size(), bootstrap.rank(), device, timeout.count() / 1000.0, e.what(),
        bootstrap.name());
  }
  return comm;
}

void check_device(int device, const std::string& name) {
  const int count = cuda::device_count();
  BRAID_CHECK(count > 0,
              "NcclProcessGroup '{}': no CUDA device is available (no device, or no usable "
              "driver); CPU tensors use an MPI process group instead",
              name);
  BRAID_CHECK(device >= 0 && device < count,
              "NcclProcessGroup '{}': cuda:{} does not exist: {} CUDA device(s) are visible", name,
              device, count);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

void copy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes > 0)
    BRAID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

// ---- NcclProcessGroup ---------------------------------------------------------------------------

NcclProcessGroup::NcclProcessGroup(ProcessGroupPtr mpi_group, int device, std::string name,
                                   std::shared_ptr<detail::NcclGroupState> state)
    : ProcessGroup(std::move(name), mpi_group->rank(), mpi_group->size(), mpi_group->world_ranks()),
      mpi_group_(std::move(mpi_group)),
      device_(device),
      state_(std::move(state)) {
  set_timeout(mpi_group_->timeout());
}

std::shared_ptr<NcclProcessGroup> NcclProcessGroup::create(ProcessGroupPtr mpi_group, int device,
                                                           std::string name) {
  BRAID_CHECK(mpi_group != nullptr, "NcclProcessGroup::create('{}'): the bootstrap group is null",
              name);
  check_device(device, name);
  cuda::DeviceGuard guard(device);
  const ncclUniqueId id = exchange_unique_id(*mpi_group, name);
  ncclComm_t comm = init_communicator(id, *mpi_group, device, name);
  auto state = detail::NcclGroupState::create(comm, device, name, mpi_group->rank(),
                                              mpi_group->size(), mpi_group->timeout());
  return std::shared_ptr<NcclProcessGroup>(
      new NcclProcessGroup(std::move(mpi_group), device, std::move(name), std::move(state)));
}

NcclProcessGroup::~NcclProcessGroup() {
  try {
    state_->shutdown(timeout());
  } catch (const std::exception& e) {
    log().error("destroying group '{}': {}", name(), e.what());
  }
}

void NcclProcessGroup::synchronize() {
  state_->synchronize();
}

WorkPtr NcclProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  nccl::check_tensor(name(), "all_reduce", "tensor", tensor, device_);
  OpSpec spec{"all_reduce",
              true,
              -1,
              fmt::format("{} {}", tensor.str(), reduce_op_name(op)),
              tensor.dtype(),
              tensor.numel(),
              {tensor.storage()},
              timeout(),
              false};
  return state_->launch(std::move(spec), [t = tensor, op](ncclComm_t comm, cudaStream_t stream,
                                                          auto deadline) {
    if (t.numel() == 0) return;
    finish_call(comm,
                ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                              nccl::nccl_dtype(t.dtype()), nccl::nccl_reduce_op(op), comm, stream),
                "ncclAllReduce", deadline);
  });
}

WorkPtr NcclProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  nccl::check_tensor(name(), "reduce_scatter", "input", input, device_);
  nccl::check_tensor(name(), "reduce_scatter", "output", output, device_);
  nccl::check_same_dtype(name(), "reduce_scatter", input, output);
  const int64_t total = input.numel();
  BRAID_CHECK(output.numel() == chunk_size(total, size(), rank()),
              "reduce_scatter on group '{}': rank {} must receive chunk_size({}, {}, {}) = {} "
              "elements, but output is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              output.str());
  OpSpec spec{"reduce_scatter",
              true,
              -1,
              fmt::format("{} -> {} {}", input.str(), output.str(), reduce_op_name(op)),
              input.dtype(),
              total,
              {input.storage(), output.storage()},
              timeout(),
              false};
  const nccl::ChunkPlan plan = nccl::plan_chunks(total, size());
  return state_->launch(std::move(spec), [in = input, out = output, op, plan, rank = rank()](
                                             ncclComm_t comm, cudaStream_t stream, auto deadline) {
    if (plan.total == 0) return;
    const size_t esize = dtype_size(in.dtype());
    const ncclDataType_t type = nccl::nccl_dtype(in.dtype());
    const ncclRedOp_t reduce = nccl::nccl_reduce_op(op);
    if (plan.even()) {
      // NCCL's in-place layout (output = this rank's chunk of input) is fine; any other overlap
      // is undefined for NCCL, so the input is copied first.
      const void* send = in.data_ptr();
      const char* own_chunk = static_cast<const char*>(in.data_ptr()) + rank * plan.base * esize;
      std::optional<cuda::ScratchBuffer> copy;
      if (overlaps(in, out) && out.data_ptr() != own_chunk) {
        copy.emplace(in.nbytes(), stream);
        copy_async(copy->as<void>(), in.data_ptr(), in.nbytes(), stream);
        send = copy->as<void>();
      }
      finish_call(comm,
                  ncclReduceScatter(send, out.data_ptr(), static_cast<size_t>(plan.base), type,
                                    reduce, comm, stream),
                  "ncclReduceScatter", deadline);
      return;
    }
    // Uneven: reduce padded slots. A rank whose chunk fills its slot receives straight into
    // output; the others receive the slot and keep its first chunk_size elements. The pack copy
    // has read the input before NCCL writes, so input and output may overlap here.
    cuda::ScratchBuffer staged(static_cast<size_t>(plan.staged_numel()) * esize, stream);
    nccl::pack_chunks(in.data_ptr(), staged.as<void>(), plan, esize, stream);
    std::optional<cuda::ScratchBuffer> slot;
    void* recv = out.data_ptr();
    if (out.numel() != plan.padded) {
      slot.emplace(static_cast<size_t>(plan.padded) * esize, stream);
      recv = slot->as<void>();
    }
    finish_call(comm,
                ncclReduceScatter(staged.as<void>(), recv, static_cast<size_t>(plan.padded), type,
                                  reduce, comm, stream),
                "ncclReduceScatter", deadline);
    if (slot) copy_async(out.data_ptr(), recv, out.nbytes(), stream);
  });
}

WorkPtr NcclProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  nccl::check_tensor(name(), "all_gather", "input", input, device_);
  nccl::check_tensor(name(), "all_gather", "output", output, device_);
  nccl::check_same_dtype(name(), "all_gather", input, output);
  const int64_t total = output.numel();
  BRAID_CHECK(input.numel() == chunk_size(total, size(), rank()),
              "all_gather on group '{}': rank {} must contribute chunk_size({}, {}, {}) = {} "
              "elements, but input is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              input.str());
  OpSpec spec{"all_gather",
              true,
              -1,
              fmt::format("{} -> {}", input.str(), output.str()),
              input.dtype(),
              total,
              {input.storage(), output.storage()},
              timeout(),
              false};
  const nccl::ChunkPlan plan = nccl::plan_chunks(total, size());
  return state_->launch(std::move(spec), [in = input, out = output, plan, rank = rank()](
                                             ncclComm_t comm, cudaStream_t stream, auto deadline) {
    if (plan.total == 0) return;
    const size_t esize = dtype_size(in.dtype());
    const ncclDataType_t type = nccl::nccl_dtype(in.dtype());
    if (plan.even()) {
      const void* send = in.data_ptr();
      const char* own_slot = static_cast<const char*>(out.data_ptr()) + rank * plan.base * esize;
      std::optional<cuda::ScratchBuffer> copy;
      if (send != own_slot && overlaps(in, out)) {
        copy.emplace(in.nbytes(), stream);
        copy_async(copy->as<void>(), in.data_ptr(), in.nbytes(), stream);
        send = copy->as<void>();
      }
      finish_call(
          comm,
          ncclAllGather(send, out.data_ptr(), static_cast<size_t>(plan.base), type, comm, stream),
          "ncclAllGather", deadline);
      return;
    }
    // Uneven: every rank sends a full slot (a short chunk is copied and padded with one zero)
    // and receives all slots, which are then unpacked into output.
    const void* send = in.data_ptr();
    std::optional<cuda::ScratchBuffer> padded;
    if (in.numel() != plan.padded) {
      padded.emplace(static_cast<size_t>(plan.padded) * esize, stream);
      BRAID_CUDA_CHECK(cudaMemsetAsync(padded->as<char>() + in.nbytes(), 0,
                                       esize * (plan.padded - in.numel()), stream));
      copy_async(padded->as<void>(), in.data_ptr(), in.nbytes(), stream);
      send = padded->as<void>();
    }
    cuda::ScratchBuffer staged(static_cast<size_t>(plan.staged_numel()) * esize, stream);
    finish_call(comm,
                ncclAllGather(send, staged.as<void>(), static_cast<size_t>(plan.padded), type, comm,
                              stream),
                "ncclAllGather", deadline);
    nccl::unpack_chunks(staged.as<void>(), out.data_ptr(), plan, esize, stream);
  });
}

WorkPtr NcclProcessGroup::broadcast(Tensor& tensor, int root) {
  nccl::check_tensor(name(), "broadcast", "tensor", tensor, device_);
  BRAID_CHECK(root >= 0 && root < size(),
              "broadcast on group '{}': root {} is not a rank of a group of size {}", name(), root,
              size());
  OpSpec spec{"broadcast",
              true,
              -1,
              fmt::format("{} from rank {}", tensor.str(), root),
              tensor.dtype(),
              tensor.numel(),
              {tensor.storage()},
              timeout(),
              false};
  return state_->launch(
      std::move(spec), [t = tensor, root](ncclComm_t comm, cudaStream_t stream, auto deadline) {
        if (t.numel() == 0) return;
        finish_call(comm,
                    ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                                  nccl::nccl_dtype(t.dtype()), root, comm, stream),
                    "ncclBroadcast", deadline);
      });
}

WorkPtr NcclProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  nccl::check_tensor(name(), "send", "tensor", tensor, device_);
  nccl::check_peer(name(), "send", dst, rank(), size());
  BRAID_CHECK(tag >= 0, "send on group '{}': tag {} is negative", name(), tag);
  OpSpec spec{"send",
              false,
              dst,
              fmt::format("{} tag {}", tensor.str(), tag),
              tensor.dtype(),
              tensor.numel(),
              {tensor.storage()},
              timeout(),
              false};
  return state_->launch(std::move(spec),
                        [t = tensor, dst](ncclComm_t comm, cudaStream_t stream, auto deadline) {
                          if (t.numel() == 0) return;
                          finish_call(comm,
                                      ncclSend(t.data_ptr(), static_cast<size_t>(t.numel()),
                                               nccl::nccl_dtype(t.dtype()), dst, comm, stream),
                                      "ncclSend", deadline);
                        });
}

WorkPtr NcclProcessGroup::recv(Tensor& tensor, int src, int tag) {
  nccl::check_tensor(name(), "recv", "tensor", tensor, device_);
  nccl::check_peer(name(), "recv", src, rank(), size());
  BRAID_CHECK(tag >= 0, "recv on group '{}': tag {} is negative", name(), tag);
  OpSpec spec{"recv",
              false,
              src,
              fmt::format("{} tag {}", tensor.str(), tag),
              tensor.dtype(),
              tensor.numel(),
              {tensor.storage()},
              timeout(),
              false};
  return state_->launch(std::move(spec),
                        [t = tensor, src](ncclComm_t comm, cudaStream_t stream, auto deadline) {
                          if (t.numel() == 0) return;
                          finish_call(comm,
                                      ncclRecv(t.data_ptr(), static_cast<size_t>(t.numel()),
                                               nccl::nccl_dtype(t.dtype()), src, comm, stream),
                                      "ncclRecv", deadline);
                        });
}

WorkPtr NcclProcessGroup::barrier() {
  OpSpec spec{"barrier", true, -1, "-", DType::u8, 0, {}, timeout(), true};
  return state_->launch(std::move(spec), [buffer = state_->barrier_buffer()](
                                             ncclComm_t comm, cudaStream_t stream, auto deadline) {
    finish_call(comm, ncclAllReduce(buffer, buffer, 1, ncclInt32, ncclSum, comm, stream),
                "ncclAllReduce (barrier)", deadline);
  });
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::split_by_color(int color, int key,
                                                               std::string name) {
  // The MPI side decides membership and order; the NCCL side follows it.
  ProcessGroupPtr sub = mpi_group_->split_by_color(color, key, name);
  if (sub != nullptr) sub->set_timeout(timeout());
#if BRAID_NCCL_HAS_COMM_SPLIT
  // Keyed by the new MPI rank, so NCCL's order is MPI's even where keys tie.
  ncclComm_t comm =
      state_->split(sub != nullptr ? color : -1, sub != nullptr ? sub->rank() : 0, name, timeout());
  if (sub == nullptr) return nullptr;
  BRAID_CHECK(comm != nullptr, "split of group '{}': ncclCommSplit gave rank {} no communicator",
              this->name(), rank());
  int nccl_rank = -1, nccl_size = -1;
  const ncclResult_t rank_status = ncclCommUserRank(comm, &nccl_rank);
  const ncclResult_t size_status = ncclCommCount(comm, &nccl_size);
  if (rank_status != ncclSuccess || size_status != ncclSuccess || nccl_rank != sub->rank() ||
      nccl_size != sub->size()) {
    (void)ncclCommAbort(comm);
    BRAID_FAIL(
        "split of group '{}' into '{}': NCCL placed this rank at {} of {}, MPI at {} of {}; the "
        "two sides disagree",
        this->name(), name, nccl_rank, nccl_size, sub->rank(), sub->size());
  }
  auto state =
      detail::NcclGroupState::create(comm, device_, name, sub->rank(), sub->size(), sub->timeout());
  return std::shared_ptr<NcclProcessGroup>(
      new NcclProcessGroup(std::move(sub), device_, std::move(name), std::move(state)));
#else
  if (sub == nullptr) return nullptr;
  return create(std::move(sub), device_, std::move(name));
#endif
}

}  // namespace braid::dist
