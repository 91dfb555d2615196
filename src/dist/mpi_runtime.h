// Process-wide MPI state behind braid::dist (internal): MPI error text, the registry of live
// MPI groups, and the control channel that diagnoses hangs.
//
// The control channel is a duplicate of MPI_COMM_WORLD serviced by one control thread per
// process. It answers peers' "what is your last sequence number in group G?" queries and runs
// the timeout watchdog over every registered group. It only uses non-blocking calls and
// polling, so it keeps answering while the main thread or a group's progress thread is stuck
// inside a blocking MPI call; that is what lets a timed-out rank name the ranks that never
// joined instead of hanging with them.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/core/error.h"

namespace braid::dist::detail {

std::string mpi_error_string(int code);

}  // namespace braid::dist::detail

// Throws braid::Error naming the MPI call and MPI's text for the failing code (every braid
// communicator uses MPI_ERRORS_RETURN, so failures come back as codes instead of aborting).
#define BRAID_MPI_CHECK(expr) \
  BRAID_CHECK_STATUS((expr), MPI_SUCCESS, ::braid::dist::detail::mpi_error_string)

namespace braid::dist::detail {

// This process's rank in `comm` and its size (errors throw, like BRAID_MPI_CHECK).
int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);

// What a group is doing; travels in control replies, so values are part of the wire format.
enum class OpKind : int32_t {
  none = 0,
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  barrier,
  split,
  send,
  recv,
};
std::string_view op_kind_name(OpKind kind);
inline bool is_collective(OpKind kind) {
  return kind != OpKind::send && kind != OpKind::recv;
}

// A group's collective counters: issued by the caller, started by the progress thread,
// completed. started_op is the kind of collective number `started`.
struct SeqState {
  int64_t issued = 0;
  int64_t started = 0;
  int64_t completed = 0;
  OpKind started_op = OpKind::none;
};

// The oldest unfinished operation of a group once it has run past its timeout.
struct StuckOp {
  uint64_t group_key = 0;
  std::string group_name;
  std::string backend = "mpi";  // in the message
  OpKind kind = OpKind::none;
  int64_t seq = 0;  // collectives only
  int peer = -1;    // send/recv: group rank of the other side
  int tag = 0;
  std::string detail;  // "f32[16] sum"
  std::chrono::milliseconds timeout{0};
  double elapsed_s = 0;
  int group_rank = 0;
  std::vector<int> world_ranks;  // of the group's members, in group-rank order
  uint64_t ticket = 0;           // the op's collective-log ticket, to match it on failure
};

// The timeout message of `op` when no peer could be asked (no control channel).
std::string describe_unasked(const StuckOp& op);

// The control thread's view of a group (implemented by OpEngine, op_engine.h).
class MonitoredGroup {
 public:
  virtual ~MonitoredGroup() = default;
  virtual uint64_t key() const = 0;
  virtual SeqState seq_state() const = 0;
  // Returns the oldest unfinished operation when it is past its deadline and no diagnosis is
  // already running for this group.
  virtual std::optional<StuckOp> take_expired(std::chrono::steady_clock::time_point now) = 0;
  // Ends a diagnosis: fails the group with `message`, unless the operation completed while the
  // peers were being asked (then only a warning is logged).
  virtual void fail_expired(const StuckOp& op, const std::string& message) = 0;
  // Called by the control thread every few ms: wakes the progress thread for an operation
  // queued without waking it, once that has waited long enough (MpiProcessGroup::issue()).
  virtual void nudge(std::chrono::steady_clock::time_point now) { (void)now; }
  // Finalize: lets the queued operations finish (or time out), stops the progress thread and
  // frees the communicator; later calls on the group throw.
  virtual void shutdown() = 0;
};

class MpiRuntime {
 public:
  // Starts the control channel; called once by init() after MPI_Init_thread.
  static void start();
  // True between start() and the MPI_Finalize of stop().
  static bool active();
  // The process-wide instance (never destroyed, so late destructors may still ask active()).
  static MpiRuntime& get();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // A key unique over the whole job: this rank in the high bits, a counter in the low ones.
  // Group rank 0 draws it and broadcasts it, so all members of a group agree.
  uint64_t new_group_key();

  void add_group(const std::shared_ptr<MonitoredGroup>& group);
  void remove_group(uint64_t key);
  // Every registered group; used by finalize to shut them down first.
  std::vector<std::shared_ptr<MonitoredGroup>> groups();

  // A progress thread left running inside a blocking MPI call (its group timed out) counts
  // here until it returns; MPI_Finalize must not run while one is inside MPI.
  void thread_detached_in_mpi() { detached_in_mpi_.fetch_add(1); }
  void detached_thread_left_mpi() { detached_in_mpi_.fetch_sub(1); }
  int detached_in_mpi() const { return detached_in_mpi_.load(); }

  // Stops the control thread and frees the control communicator; then marks MPI as unusable.
  // Groups must have been shut down before.
  void stop_control();
  void mark_finalized();

 private:
  MpiRuntime() = default;
  struct Impl;
  Impl* impl_ = nullptr;
  int world_rank_ = 0;
  int world_size_ = 1;
  std::atomic<int> detached_in_mpi_{0};
  std::atomic<uint32_t> group_counter_{0};
};

}  // namespace braid::dist::detail
