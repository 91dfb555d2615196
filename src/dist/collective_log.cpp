// The ring of recent collectives and the BRAID_COLLECTIVE_TIMEOUT_S default.
#include "braid/dist/collective_log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "braid/core/error.h"
#include "braid/core/logging.h"

namespace braid::dist {

std::chrono::milliseconds default_collective_timeout() {
  const char* env = std::getenv("BRAID_COLLECTIVE_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return std::chrono::minutes(5);
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(env, &end);
  BRAID_CHECK(errno == 0 && end != env && *end == '\0' && std::isfinite(seconds) && seconds > 0,
              "BRAID_COLLECTIVE_TIMEOUT_S='{}' is not a positive number of seconds", env);
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

std::string_view collective_status_name(CollectiveStatus status) {
  switch (status) {
    case CollectiveStatus::queued:
      return "queued";
    case CollectiveStatus::running:
      return "running";
    case CollectiveStatus::done:
      return "done";
    case CollectiveStatus::failed:
      return "failed";
    case CollectiveStatus::timed_out:
      return "timed out";
  }
  return "?";
}

uint64_t CollectiveLog::add(CollectiveRecord record) {
  std::lock_guard lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  Slot& slot = slots_[ticket % kCapacity];
  slot.ticket = ticket;
  TrafficCount& count = traffic_[record.group][record.op];
  ++count.calls;
  count.bytes += record.numel * static_cast<int64_t>(dtype_size(record.dtype));
  slot.record = std::move(record);
  slot.issued_steady = std::chrono::steady_clock::now();
  slot.started = false;
  return ticket;
}

TrafficTable CollectiveLog::traffic() const {
  std::lock_guard lock(mutex_);
  return traffic_;
}

void CollectiveLog::reset_traffic() {
  std::lock_guard lock(mutex_);
  traffic_.clear();
}

CollectiveLog::Slot* CollectiveLog::find(uint64_t ticket) {
  Slot& slot = slots_[ticket % kCapacity];
  return slot.ticket == ticket ? &slot : nullptr;
}

void CollectiveLog::mark_started(uint64_t ticket) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (Slot* slot = find(ticket)) {
    slot->started = true;
    slot->started_steady = now;
    slot->record.queued_s = std::chrono::duration<double>(now - slot->issued_steady).count();
    slot->record.status = CollectiveStatus::running;
  }
}

void CollectiveLog::mark_finished(uint64_t ticket, CollectiveStatus status) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (Slot* slot = find(ticket)) {
    // An operation failed before it started (its group had already failed) never ran.
    if (slot->started)
      slot->record.duration_s = std::chrono::duration<double>(now - slot->started_steady).count();
    slot->record.status = status;
  }
}

std::vector<CollectiveRecord> CollectiveLog::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<CollectiveRecord> out;
  out.reserve(kCapacity);
  // Tickets grow by one per record, so the oldest live slot follows the newest.
  const uint64_t first = next_ticket_ > kCapacity ? next_ticket_ - kCapacity : 1;
  for (uint64_t t = first; t < next_ticket_; ++t) out.push_back(slots_[t % kCapacity].record);
  return out;
}

namespace {

std::string seconds_str(double s) {
  if (s < 0) return "-";
  if (s < 1e-3) return fmt::format("{:.0f}us", s * 1e6);
  if (s < 1.0) return fmt::format("{:.2f}ms", s * 1e3);
  return fmt::format("{:.2f}s", s);
}

}  // namespace

std::string CollectiveLog::format() const {
  std::string out;
  for (const CollectiveRecord& r : snapshot()) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(r.issued.time_since_epoch()) % 1000;
    const std::string what =
        r.seq > 0 ? fmt::format("seq {}", r.seq) : fmt::format("peer {}", r.peer);
    out += fmt::format("  {:%H:%M:%S}.{:03d} group '{}' {} {} {}[{}] queued {} ran {} {}\n",
                       fmt::localtime(std::chrono::system_clock::to_time_t(r.issued)),
                       static_cast<int>(ms.count()), r.group, r.op, what, dtype_name(r.dtype),
                       r.numel, seconds_str(r.queued_s), seconds_str(r.duration_s),
                       collective_status_name(r.status));
  }
  return out.empty() ? "  (no collectives recorded)\n" : out;
}

void CollectiveLog::dump_to_log(std::string_view reason) const {
  log().error("{}; last {} collectives on this rank (oldest first):\n{}", reason, kCapacity,
              format());
  log().flush();
}

CollectiveLog& collective_log() {
  // Never destroyed: groups may still record while static destructors run at exit.
  static CollectiveLog* log = new CollectiveLog();
  return *log;
}

}  // namespace braid::dist
