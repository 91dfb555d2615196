// The process-wide trace recorder (events under one mutex, written as Trace Event JSON) and
// the per-thread phase clocks.
#include "braid/core/trace.h"

#include <pthread.h>

#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "braid/core/device_trace.h"
#include "braid/core/error.h"

namespace braid::trace {

// ---- phase clocks ------------------------------------------------------------------------------

namespace {

constexpr size_t kPhases = static_cast<size_t>(Phase::count);
thread_local std::array<double, kPhases> t_phase_us{};
thread_local std::array<int, kPhases> t_phase_depth{};

double micros(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

}  // namespace

double phase_us(Phase phase) {
  return t_phase_us[static_cast<size_t>(phase)];
}

void add_phase_us(Phase phase, double us) {
  t_phase_us[static_cast<size_t>(phase)] += us;
}

PhaseScope::PhaseScope(Phase phase)
    : phase_(phase), outermost_(t_phase_depth[static_cast<size_t>(phase)]++ == 0) {
  if (!outermost_) return;
  start_ = Clock::now();
  waited_at_start_ = phase_us(Phase::comm_wait);
}

PhaseScope::~PhaseScope() {
  --t_phase_depth[static_cast<size_t>(phase_)];
  if (!outermost_) return;
  const double waited =
      phase_ == Phase::comm_wait ? 0 : phase_us(Phase::comm_wait) - waited_at_start_;
  add_phase_us(phase_, micros(start_, Clock::now()) - waited);
}

// ---- recording ---------------------------------------------------------------------------------

namespace detail {
std::atomic<bool> recording{false};
}

namespace {

struct Event {
  std::string name;
  std::string category;
  char phase = 'X';  // X: complete; b / e: async begin / end
  int track = 0;
  double ts = 0, dur = 0;
  uint64_t id = 0;
  std::vector<Arg> args;
};

constexpr int kFirstNamedTrack = 1000;  // named tracks after every thread's

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  Clock::time_point origin;
  int pid = 0;
  std::string process_name;
  std::map<int, std::string> track_names;
  std::map<std::string, int> named_tracks;
  int next_thread_track = 0;
};

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: threads may record at exit
  return *r;
}

thread_local int t_track = -1;
thread_local std::string t_track_name;

// This thread's track, registered on first use. Call with the recorder's mutex held.
int this_track_locked(Recorder& r) {
  if (t_track < 0) {
    t_track = r.next_thread_track++;
    if (t_track_name.empty()) {
      char buf[32] = {};
      pthread_getname_np(pthread_self(), buf, sizeof buf);
      t_track_name = buf[0] ? buf : "thread";
    }
  }
  r.track_names[t_track] = t_track_name;
  return t_track;
}

int named_track_locked(Recorder& r, const std::string& name) {
  auto [it, added] =
      r.named_tracks.emplace(name, kFirstNamedTrack + static_cast<int>(r.named_tracks.size()));
  if (added) r.track_names[it->second] = name;
  return it->second;
}

// Records one event; `track` < 0 means this thread's.
void add(Event e, int track, const std::string* named, Clock::time_point start,
         Clock::time_point end) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (!enabled() || start < r.origin) return;
  e.track = named ? named_track_locked(r, *named) : track >= 0 ? track : this_track_locked(r);
  e.ts = micros(r.origin, start);
  e.dur = std::max(0.0, micros(start, end));
  r.events.push_back(std::move(e));
}

nlohmann::json args_json(const std::vector<Arg>& args) {
  nlohmann::json j = nlohmann::json::object();
  for (const Arg& a : args) {
    if (a.is_text)
      j[a.key] = a.text;
    else if (a.number == std::floor(a.number) && std::fabs(a.number) < 9.0e15)
      j[a.key] = static_cast<int64_t>(a.number);  // counts and sizes print as integers
    else
      j[a.key] = a.number;
  }
  return j;
}

}  // namespace

Span::~Span() {
  if (!active_) return;
  if (name_.empty()) name_ = category_;
  complete(std::move(name_), category_, start_, Clock::now(), std::move(args_));
}

void complete(std::string name, const char* category, Clock::time_point start,
              Clock::time_point end, std::vector<Arg> args) {
  if (!enabled()) return;
  add({std::move(name), category, 'X', 0, 0, 0, 0, std::move(args)}, -1, nullptr, start, end);
}

void complete_on(const std::string& track, std::string name, const char* category,
                 Clock::time_point start, Clock::time_point end, std::vector<Arg> args) {
  if (!enabled()) return;
  add({std::move(name), category, 'X', 0, 0, 0, 0, std::move(args)}, -1, &track, start, end);
}

void async_span(std::string name, const char* category, uint64_t id, Clock::time_point start,
                Clock::time_point end, std::vector<Arg> args) {
  if (!enabled()) return;
  Event begin{name, category, 'b', 0, 0, 0, id, std::move(args)};
  Event finish{std::move(name), category, 'e', 0, 0, 0, id, {}};
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (!enabled() || start < r.origin) return;
  // Viewers group asynchronous spans per process, whatever their tid: no thread track is made.
  begin.track = finish.track = 0;
  begin.ts = micros(r.origin, start);
  finish.ts = std::max(begin.ts, micros(r.origin, end));
  r.events.push_back(std::move(begin));
  r.events.push_back(std::move(finish));
}

void name_this_thread(std::string name) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  t_track_name = std::move(name);
  if (t_track >= 0) r.track_names[t_track] = t_track_name;
}

void start(int pid, std::string process_name) {
  detail::clear_device_spans();
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.events.clear();
  r.origin = Clock::now();
  r.pid = pid;
  r.process_name = std::move(process_name);
  detail::recording.store(true, std::memory_order_relaxed);
}

void stop() {
  // While still recording: the device spans become events only once their events are read.
  detail::resolve_device_spans();
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  detail::recording.store(false, std::memory_order_relaxed);
}

size_t event_count() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  return r.events.size();
}

void write(const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r.pid},
                      {"args", {{"name", r.process_name}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", r.pid},
                      {"args", {{"sort_index", r.pid}}}});
    for (const auto& [track, name] : r.track_names) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r.pid},
                        {"tid", track},
                        {"args", {{"name", name}}}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", r.pid},
                        {"tid", track},
                        {"args", {{"sort_index", track}}}});
    }
    for (const Event& e : r.events) {
      nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"ph", std::string(1, e.phase)},
                          {"pid", r.pid},   {"tid", e.track},    {"ts", e.ts}};
      if (e.phase == 'X') j["dur"] = e.dur;
      if (e.phase != 'X') j["id"] = e.id;
      if (!e.args.empty()) j["args"] = args_json(e.args);
      events.push_back(std::move(j));
    }
  }
  std::ofstream out(path);
  BRAID_CHECK(out.good(), "cannot write the trace file {} (does its folder exist?)", path);
  out << nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump()
      << "\n";
  BRAID_CHECK(out.good(), "writing the trace file {} failed", path);
}

void merge(const std::vector<std::string>& inputs, const std::string& output) {
  nlohmann::json events = nlohmann::json::array();
  for (const std::string& path : inputs) {
    std::ifstream in(path);
    BRAID_CHECK(in.good(), "cannot read the trace file {} to merge it", path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      BRAID_FAIL("the trace file {} is not valid JSON: {}", path, e.what());
    }
    BRAID_CHECK(j.contains("traceEvents") && j["traceEvents"].is_array(),
                "the trace file {} has no traceEvents array", path);
    for (auto& e : j["traceEvents"]) events.push_back(std::move(e));
  }
  std::ofstream out(output);
  BRAID_CHECK(out.good(), "cannot write the trace file {}", output);
  out << nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump()
      << "\n";
  BRAID_CHECK(out.good(), "writing the trace file {} failed", output);
}

}  // namespace braid::trace
