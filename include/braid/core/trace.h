// Step tracing and phase clocks: spans written as a Chrome/Perfetto trace (Trace Event JSON)
// while a trace is recording, and the per-thread phase totals behind StepMetrics' phase split.
//
// Tracing is process-wide and off by default: Span and the record functions cost one relaxed
// atomic load when it is off. Every thread records onto its own track (a Chrome "thread"), so
// the spans of one track nest by construction; spans measured elsewhere (a collective, from
// its start on the transport to its completion) go onto named tracks of their own. Times are
// microseconds from the origin set by start().
//
// The phase clocks are always on: PhaseScope adds its wall time to this thread's total of its
// phase, minus the communication waits inside it, so the phases of one thread never overlap.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace braid::trace {

using Clock = std::chrono::steady_clock;

// ---- phase clocks (always on) ------------------------------------------------------------------

enum class Phase { forward, comm_wait, optimizer, checkpoint, count };

// This thread's total time in `phase` so far, microseconds.
double phase_us(Phase phase);
// Adds to this thread's total of `phase` (comm_wait: time the host blocked on a Work).
void add_phase_us(Phase phase, double us);

// Counts its lifetime into this thread's `phase`, minus the comm_wait inside it. Nested scopes
// of the same phase count once (the outermost).
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase phase_;
  bool outermost_;
  Clock::time_point start_;
  double waited_at_start_;
};

// ---- trace recording ----------------------------------------------------------------------------

namespace detail {
extern std::atomic<bool> recording;
}

// True while a trace is recording (between start() and stop()).
inline bool enabled() {
  return detail::recording.load(std::memory_order_relaxed);
}

// One argument of an event ("args" in the JSON): a number or a string.
struct Arg {
  Arg(std::string k, int64_t v) : key(std::move(k)), number(static_cast<double>(v)) {}
  Arg(std::string k, int v) : key(std::move(k)), number(v) {}
  Arg(std::string k, double v) : key(std::move(k)), number(v) {}
  Arg(std::string k, std::string v) : key(std::move(k)), text(std::move(v)), is_text(true) {}
  Arg(std::string k, const char* v) : key(std::move(k)), text(v), is_text(true) {}
  std::string key;
  std::string text;
  double number = 0;
  bool is_text = false;
};

// A span on this thread's track, from construction to destruction; inert while not recording.
// Name it only when active() (formatting a name costs more than the span):
//   trace::Span span("forward");
//   if (span.active()) span.name(fmt::format("block {}", i)).arg({"block", i});
class Span {
 public:
  explicit Span(const char* category, const char* name = nullptr)
      : category_(category), active_(enabled()) {
    if (active_) {
      if (name) name_ = name;
      start_ = Clock::now();
    }
  }
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool active() const { return active_; }
  Span& name(std::string name) {
    name_ = std::move(name);
    return *this;
  }
  Span& arg(Arg a) {
    args_.push_back(std::move(a));
    return *this;
  }

 private:
  const char* category_;
  bool active_;
  std::string name_;
  std::vector<Arg> args_;
  Clock::time_point start_;
};

// A finished span measured by the caller: on this thread's track, or on the named `track`.
// Dropped when not recording or when it began before the trace did.
void complete(std::string name, const char* category, Clock::time_point start,
              Clock::time_point end, std::vector<Arg> args = {});
void complete_on(const std::string& track, std::string name, const char* category,
                 Clock::time_point start, Clock::time_point end, std::vector<Arg> args = {});
// An asynchronous span (Chrome "b"/"e" pair with `id`): for work that overlaps others of its
// kind, such as point-to-point transfers posted ahead of use.
void async_span(std::string name, const char* category, uint64_t id, Clock::time_point start,
                Clock::time_point end, std::vector<Arg> args = {});

// Names this thread's track ("compute"); unnamed tracks take the thread's system name.
void name_this_thread(std::string name);

// Starts recording (clearing earlier events) with the time origin now; `pid` and
// `process_name` label this process in the written trace (a rank and its grid coordinates).
void start(int pid, std::string process_name);
// Stops recording; the events stay until written or the next start(). Waits for the device work
// the device spans (braid/core/device_trace.h) cover, to read their times.
void stop();
// Number of events recorded since start().
size_t event_count();
// The recorded events as Trace Event JSON ({"traceEvents": [...]}, with the process and track
// names), written to `path`; clear error when it cannot be written.
void write(const std::string& path);
// Concatenates the traces at `inputs` (one per rank, each its own pid) into `output`.
void merge(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace braid::trace
