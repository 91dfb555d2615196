// Device spans: timed events around device work, kept until the trace stops and then placed on
// the host's time line through one anchor event per device (see braid/core/device_trace.h).
#include "braid/core/device_trace.h"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace braid::trace {

struct DeviceSpan::Pending {
  std::string name;
  const char* category = "";
  Stream stream;
  Event start{EventTiming::on};
  Event end{EventTiming::on};
  std::vector<Arg> args;
  uint64_t started_in = 0;  // DeviceSpans::traces_started when the span began
};

namespace {

// A device event whose device time is known on the host's clock.
struct Anchor {
  Event event{EventTiming::on};
  Clock::time_point host;
};

struct DeviceSpans {
  std::mutex mutex;
  // Counts the traces started: a span that began in an earlier one (on another thread, across a
  // stop and a start) is dropped rather than placed with the new trace's anchor.
  uint64_t traces_started = 0;
  std::map<std::pair<int, int>, Anchor> anchors;  // by (device kind, index)
  std::vector<std::unique_ptr<DeviceSpan::Pending>> finished;
};

DeviceSpans& device_spans() {
  static DeviceSpans* spans = new DeviceSpans();  // never destroyed, as the host recorder
  return *spans;
}

std::pair<int, int> key(Device device) {
  return {static_cast<int>(device.kind), device.index};
}

// The first span of a trace on `stream`'s device ties that device's clock to the host's.
// Returns the trace the anchor belongs to.
uint64_t ensure_anchor(const Stream& stream) {
  DeviceSpans& spans = device_spans();
  std::lock_guard lock(spans.mutex);
  if (spans.anchors.contains(key(stream.device()))) return spans.traces_started;
  Anchor anchor;
  stream.synchronize();  // idle, the stream passes the anchor as it is recorded
  anchor.host = Clock::now();
  anchor.event.record(stream);
  spans.anchors.emplace(key(stream.device()), std::move(anchor));
  return spans.traces_started;
}

Clock::time_point at(Clock::time_point host, double ms) {
  return host +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

DeviceSpan::DeviceSpan(const Stream& stream, const char* category, const char* name) {
  if (!enabled() || stream.device().is_cpu()) return;
  const uint64_t started_in = ensure_anchor(stream);
  pending_ = std::make_unique<Pending>();
  pending_->started_in = started_in;
  pending_->name = name;
  pending_->category = category;
  pending_->stream = stream;
  pending_->start.record(stream);
}

DeviceSpan::~DeviceSpan() {
  if (!pending_ || !enabled()) return;
  try {
    pending_->end.record(pending_->stream);
  } catch (...) {
    return;  // the device failed; the work's own error tells why, and the span is dropped
  }
  DeviceSpans& spans = device_spans();
  std::lock_guard lock(spans.mutex);
  if (pending_->started_in == spans.traces_started) spans.finished.push_back(std::move(pending_));
}

DeviceSpan& DeviceSpan::arg(Arg a) {
  if (pending_) pending_->args.push_back(std::move(a));
  return *this;
}

namespace detail {

void clear_device_spans() {
  DeviceSpans& spans = device_spans();
  std::lock_guard lock(spans.mutex);
  ++spans.traces_started;
  spans.anchors.clear();
  spans.finished.clear();
}

void resolve_device_spans() {
  std::map<std::pair<int, int>, Anchor> anchors;
  std::vector<std::unique_ptr<DeviceSpan::Pending>> finished;
  {
    DeviceSpans& spans = device_spans();
    std::lock_guard lock(spans.mutex);
    anchors.swap(spans.anchors);
    finished.swap(spans.finished);
  }
  for (const auto& span : finished) {
    const Device device = span->stream.device();
    const Anchor& anchor = anchors.at(key(device));
    const double start_ms = Event::elapsed_ms(anchor.event, span->start);
    const double end_ms = Event::elapsed_ms(anchor.event, span->end);
    complete_on(fmt::format("{} {}", device.str(), stream_role_name(span->stream.role())),
                std::move(span->name), span->category, at(anchor.host, start_ms),
                at(anchor.host, end_ms), std::move(span->args));
  }
}

}  // namespace detail
}  // namespace braid::trace
