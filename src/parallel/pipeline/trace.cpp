// Chrome / Perfetto trace JSON of pipeline actions: one track per stage.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "braid/core/error.h"
#include "braid/parallel/pipeline/validate.h"

namespace braid::parallel::pipeline {

std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::string& title,
                              double time_scale) {
  nlohmann::json trace = nlohmann::json::array();
  int stages = 0;
  for (const TraceEvent& e : events) stages = std::max(stages, e.stage + 1);
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", title}}}});
  for (int s = 0; s < stages; ++s)
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 0},
                     {"tid", s},
                     {"args", {{"name", fmt::format("stage {}", s)}}}});
  for (const TraceEvent& e : events) {
    const bool fwd = e.action.kind == ActionKind::forward;
    trace.push_back({{"name", e.action.str()},
                     {"cat", fwd ? "forward" : "backward"},
                     {"ph", "X"},
                     {"pid", 0},
                     {"tid", e.stage},
                     {"ts", e.start * time_scale},
                     {"dur", e.duration * time_scale},
                     {"args", {{"microbatch", e.action.microbatch}, {"chunk", e.action.chunk}}}});
  }
  return nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}.dump(1);
}

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::string& title, double time_scale) {
  std::ofstream out(path);
  BRAID_CHECK(out.good(), "cannot write the trace file {}", path);
  out << chrome_trace_json(events, title, time_scale) << "\n";
  BRAID_CHECK(out.good(), "writing the trace file {} failed", path);
}

}  // namespace braid::parallel::pipeline
