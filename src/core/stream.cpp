// Streams and events: the CPU's immediate no-ops, and dispatch to the backend registered for a
// device kind (StreamOps), so core never links against CUDA.
#include "braid/core/stream.h"

#include <cstring>
#include <utility>

#include "braid/core/allocator.h"
#include "braid/core/device_trace.h"
#include "braid/core/error.h"
#include "braid/core/storage.h"

namespace braid {
namespace {

StreamOps g_stream_ops[kNumDeviceKinds];

}  // namespace

const char* stream_role_name(StreamRole role) {
  switch (role) {
    case StreamRole::compute:
      return "compute";
    case StreamRole::copy:
      return "copy";
    case StreamRole::comm:
      return "comm";
  }
  return "?";
}

void register_stream_ops(DeviceKind kind, StreamOps ops) {
  g_stream_ops[static_cast<int>(kind)] = ops;
}

const StreamOps& stream_ops(DeviceKind kind) {
  const StreamOps& ops = g_stream_ops[static_cast<int>(kind)];
  BRAID_CHECK(ops.get != nullptr,
              "no stream backend for {} devices: this braid was built without CUDA, or its "
              "kernels were never registered (braid::cuda::ensure_registered)",
              Device{kind, 0}.str());
  return ops;
}

Stream::Stream(Device device, StreamRole role) : device_(device), role_(role) {
  if (!device.is_cpu()) native_ = stream_ops(device.kind).get(device.index, role);
}

void Stream::wait(const Event& event) const {
  if (event.native() == nullptr) return;
  if (device_.is_cpu()) {
    // CPU work runs on the host as it is issued: ordering it after the event means waiting.
    event.synchronize();
    return;
  }
  stream_ops(device_.kind).wait(native_, device_.index, event.native());
}

void Stream::synchronize() const {
  if (!device_.is_cpu()) stream_ops(device_.kind).synchronize(native_, device_.index);
}

bool Stream::done() const {
  return device_.is_cpu() || stream_ops(device_.kind).done(native_, device_.index);
}

Event::~Event() {
  reset();
}

Event::Event(Event&& other) noexcept
    : device_(other.device_),
      native_(std::exchange(other.native_, nullptr)),
      timing_(other.timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    native_ = std::exchange(other.native_, nullptr);
    timing_ = other.timing_;
  }
  return *this;
}

void Event::reset() {
  if (native_ != nullptr) stream_ops(device_.kind).destroy_event(native_, device_.index);
  native_ = nullptr;
  device_ = Device::cpu();
}

void Event::record(const Stream& stream) {
  if (stream.device().is_cpu()) {
    reset();  // everything issued on the CPU is done at once
    return;
  }
  const StreamOps& ops = stream_ops(stream.device().kind);
  // A backend event belongs to one device: recording on another device's stream needs a new one.
  if (native_ != nullptr && device_ != stream.device()) reset();
  if (native_ == nullptr) {
    native_ = ops.create_event(stream.device().index, timing_);
    device_ = stream.device();
  }
  ops.record(native_, stream.native(), device_.index);
}

bool Event::done() const {
  return native_ == nullptr || stream_ops(device_.kind).event_done(native_, device_.index);
}

void Event::synchronize() const {
  if (native_ != nullptr) stream_ops(device_.kind).event_synchronize(native_, device_.index);
}

double Event::elapsed_ms(const Event& start, const Event& end) {
  for (const Event* e : {&start, &end}) {
    BRAID_CHECK(e->timing_ == EventTiming::on,
                "Event::elapsed_ms: the {} event was made without timing; construct it as "
                "Event(EventTiming::on)",
                e == &start ? "start" : "end");
    BRAID_CHECK(e->native_ != nullptr,
                "Event::elapsed_ms: the {} event was never recorded on a device stream (CPU "
                "work is done as it is issued, so its events hold no time)",
                e == &start ? "start" : "end");
  }
  BRAID_CHECK(start.device_ == end.device_,
              "Event::elapsed_ms: the events were recorded on {} and {}; times compare only on "
              "one device",
              start.device_.str(), end.device_.str());
  end.synchronize();
  return stream_ops(end.device_.kind).elapsed_ms(start.native_, end.native_, end.device_.index);
}

void copy_async(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                const Stream& stream) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    BRAID_CHECK(stream.device().is_cpu(), "copy_async: a host-to-host copy on {}'s {} stream",
                stream.device().str(), stream_role_name(stream.role()));
    std::memcpy(dst, src, bytes);
    return;
  }
  BRAID_CHECK(
      !stream.device().is_cpu() && (stream.device() == dst_device || stream.device() == src_device),
      "copy_async from {} to {} on {}'s {} stream: the stream must belong to a device of "
      "the copy",
      src_device.str(), dst_device.str(), stream.device().str(), stream_role_name(stream.role()));
  trace::DeviceSpan span(stream, "copy",
                         src_device.is_cpu()   ? "copy host to device"
                         : dst_device.is_cpu() ? "copy device to host"
                                               : "copy device to device");
  if (span.active()) span.arg({"bytes", static_cast<int64_t>(bytes)});
  stream_ops(stream.device().kind)
      .copy(dst, dst_device, src, src_device, bytes, stream.native(), stream.device().index);
}

void record_stream(const Storage& storage, const Stream& stream) {
  if (storage.device().is_cpu() || stream.device().is_cpu() || storage.data() == nullptr) return;
  // The allocator's event for the release is recorded on `stream`, which CUDA requires to be
  // on the event's device: memory used from another device's stream needs a synchronize.
  BRAID_CHECK(stream.device() == storage.device(),
              "record_stream: memory on {} used on {}'s {} stream; synchronize that stream "
              "before releasing the memory instead",
              storage.device().str(), stream.device().str(), stream_role_name(stream.role()));
  const DeviceMemoryOps& ops = device_memory(storage.device().kind);
  if (ops.record_stream) ops.record_stream(storage.data(), storage.device().index, stream.native());
}

}  // namespace braid
