// Device spans in the step trace: work a device stream runs (the kernel table's kernels, copies),
// timed by the device itself with timed events and placed on the stream's own track
// ("cuda:0 compute") of the trace in braid/core/trace.h.
//
// The device's clock is tied to the host's once per device and trace: the first device span
// on a device synchronizes the stream it is on and records an anchor event there, which the
// idle stream passes at once, so the anchor's device time is the host's time of recording.
// Every span's start and end are the anchor's host time plus the events' elapsed device time.
// The events are read when the trace stops (trace::stop waits for them), never during the
// traced steps, so tracing adds event records to the streams but no host waits after the first.
#pragma once

#include <memory>
#include <vector>

#include "braid/core/stream.h"
#include "braid/core/trace.h"

namespace braid::trace {

// The span of the work issued on `stream` during this object's lifetime, as the device runs it;
// inert while no trace records or on the CPU (whose work the host spans show already).
//   { trace::DeviceSpan span(Stream::compute(device), "kernel", "gemm"); launch(...); }
class DeviceSpan {
 public:
  DeviceSpan(const Stream& stream, const char* category, const char* name);
  ~DeviceSpan();
  DeviceSpan(const DeviceSpan&) = delete;
  DeviceSpan& operator=(const DeviceSpan&) = delete;

  bool active() const { return pending_ != nullptr; }
  DeviceSpan& arg(Arg a);

  struct Pending;

 private:
  std::unique_ptr<Pending> pending_;
};

namespace detail {
// Called by trace::start and trace::stop: drops the device spans and anchors of an earlier trace;
// turns the finished device spans into trace events (waiting for their events), while the
// trace still records.
void clear_device_spans();
void resolve_device_spans();
}  // namespace detail

}  // namespace braid::trace
