// The per-rank record of recent collectives (a ring of the last 64) and the collective timeout
// default, so a hang can be diagnosed from what each rank last issued and how long it ran.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "braid/core/dtype.h"

namespace braid::dist {

// The timeout a new group starts with: BRAID_COLLECTIVE_TIMEOUT_S (seconds, fractions allowed)
// when set, else 5 minutes. A malformed or non-positive value throws rather than silently
// falling back, since a wrong timeout turns a hang into minutes of lost time.
std::chrono::milliseconds default_collective_timeout();

enum class CollectiveStatus { queued, running, done, failed, timed_out };
std::string_view collective_status_name(CollectiveStatus status);

struct CollectiveRecord {
  std::string group;
  std::string op;
  int64_t seq = 0;  // the group's collective sequence number; 0 for send/recv
  int peer = -1;    // send/recv: the group rank on the other side
  DType dtype = DType::f32;
  int64_t numel = 0;
  std::chrono::system_clock::time_point issued;
  // From the moment the backend started the operation to its end; negative while unfinished.
  double queued_s = -1.0;
  double duration_s = -1.0;
  CollectiveStatus status = CollectiveStatus::queued;
};

// Totals of one (group, op) pair since the last reset_traffic().
struct TrafficCount {
  int64_t calls = 0;
  // The operations' buffer sizes: the tensor of an all-reduce, broadcast, send or recv, the
  // whole (unscattered / gathered) buffer of a reduce-scatter or all-gather.
  int64_t bytes = 0;
};
// group name -> op name -> totals.
using TrafficTable = std::map<std::string, std::map<std::string, TrafficCount>>;

// A fixed-size ring of records shared by every group of the process (all backends), so the
// dump after a failure shows how the groups interleaved. Thread-safe; updates to a record
// that has already been overwritten are dropped.
class CollectiveLog {
 public:
  static constexpr size_t kCapacity = 64;

  // Adds a record and returns its ticket for the updates below.
  uint64_t add(CollectiveRecord record);
  void mark_started(uint64_t ticket);
  void mark_finished(uint64_t ticket, CollectiveStatus status);

  // Oldest first.
  std::vector<CollectiveRecord> snapshot() const;
  // One line per record, oldest first, for logs and error reports.
  std::string format() const;
  // Writes format() to braid::log() at error level, headed by `reason`.
  void dump_to_log(std::string_view reason) const;

  // What every group of this process issued since the last reset (benchmarks use it to
  // measure communication volume per step).
  TrafficTable traffic() const;
  void reset_traffic();

 private:
  struct Slot {
    uint64_t ticket = 0;  // 0: never used
    CollectiveRecord record;
    std::chrono::steady_clock::time_point issued_steady;
    std::chrono::steady_clock::time_point started_steady;
    bool started = false;
  };
  Slot* find(uint64_t ticket);

  mutable std::mutex mutex_;
  Slot slots_[kCapacity];
  uint64_t next_ticket_ = 1;
  TrafficTable traffic_;
};

// The process-wide log every backend records into.
CollectiveLog& collective_log();

}  // namespace braid::dist
