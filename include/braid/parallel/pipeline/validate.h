// Runs every stage's action list of a schedule against the others on a simulated clock:
// proves the schedule deadlock-free and complete, and measures its bubble and memory.
//
// Semantics (those of the runtime): receives and sends are posted without blocking; a
// forward or backward waits until the data it needs has been sent (plus `comm` time), and
// needs its receive posted earlier in its list; a backward needs its forward done on the
// same stage. Each stage runs its list in order.
#pragma once

#include <string>
#include <vector>

#include "braid/parallel/pipeline/schedule.h"

namespace braid::parallel::pipeline {

struct ActionCosts {
  double forward = 1.0;
  double backward = 2.0;
  double comm = 0.0;  // from a send to the data being usable by the receiver
};

// One executed compute action, for traces.
struct TraceEvent {
  int stage = 0;
  Action action;
  double start = 0, duration = 0;  // in cost units (simulation) or microseconds (a real run)
};

struct ScheduleReport {
  double makespan = 0;
  double bubble_fraction = 0;           // idle share of stages x makespan
  double analytic_bubble_fraction = 0;  // analytic_bubble_fraction(shape)
  std::vector<int> peak_activations;    // per stage: most micro-batch chunks held at once
  std::vector<TraceEvent> events;
};

// Throws a clear error naming the stage and action for: a deadlock (every stage blocked),
// a missing or duplicate forward/backward, a backward before its forward, a compute whose
// receive was never posted, a send nobody receives or a receive nobody sends.
ScheduleReport validate(const Schedule& schedule, const ActionCosts& costs = {});

// Chrome / Perfetto trace JSON ("traceEvents", one track per stage); `time_scale` converts
// event times to microseconds.
std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::string& title,
                              double time_scale = 1.0);
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::string& title, double time_scale = 1.0);

}  // namespace braid::parallel::pipeline
