// Streams and events, device-agnostic: each device has a compute, a copy and a communication
// stream, ordered against each other only through events. On the CPU every operation is
// immediate and these are no-ops; the CUDA backend registers the real ones (StreamOps).
//
// The model:
// - compute: every kernel, cuBLAS call and copy an op issues, in issue order. Device memory
//   (Storage) is allocated for the compute stream and reused by it without synchronisation.
// - copy: host<->device staging beside the compute (next batches, checkpoint snapshots).
// - comm: collectives (NCCL).
// None of them is the legacy default stream, and none synchronises with another implicitly:
// work on one stream that must see results of another waits for an event recorded there
// (`Event e; e.record(Stream::compute(d)); Stream::copy(d).wait(e);`).
//
// Memory used on a stream other than its allocation stream (the compute stream): call
// record_stream(storage, stream) before the last reference goes, and the allocator reuses the
// memory only after the work issued on `stream` so far has finished. It is not needed when the
// compute stream has already waited for an event recorded after that use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/core/device.h"

namespace braid {

class Storage;

enum class StreamRole : uint8_t { compute = 0, copy = 1, comm = 2 };
inline constexpr int kNumStreamRoles = 3;
const char* stream_role_name(StreamRole role);

class Event;

// A device's stream of one role: a cheap value, valid for the life of the process.
class Stream {
 public:
  Stream() = default;  // the CPU's compute stream
  static Stream compute(Device device) { return Stream(device, StreamRole::compute); }
  static Stream copy(Device device) { return Stream(device, StreamRole::copy); }
  static Stream comm(Device device) { return Stream(device, StreamRole::comm); }
  Stream(Device device, StreamRole role);

  Device device() const { return device_; }
  StreamRole role() const { return role_; }
  // The backend's handle (a cudaStream_t), nullptr on the CPU.
  void* native() const { return native_; }

  // Work issued on this stream after the call waits until `event`'s recorded work is done;
  // the host does not block. An event never recorded (or a CPU one) is no wait.
  void wait(const Event& event) const;
  // Blocks the host until everything issued on this stream so far has finished.
  void synchronize() const;
  // True when everything issued so far has finished.
  bool done() const;

  bool operator==(const Stream& other) const {
    return device_ == other.device_ && role_ == other.role_;
  }

 private:
  Device device_;
  StreamRole role_ = StreamRole::compute;
  void* native_ = nullptr;
};

// Whether an Event can measure time (Event::elapsed_ms). Ordering-only events (the default) are
// cheaper to record and wait for; timed ones are for tracing.
enum class EventTiming : uint8_t { off, on };

// A point in a stream's work. Move-only; the backend event is created at the first record.
class Event {
 public:
  Event() = default;
  explicit Event(EventTiming timing) : timing_(timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work issued on `stream` so far (re-recording moves the point). On the CPU all
  // of it is done already.
  void record(const Stream& stream);
  // True when the recorded work has finished (or nothing was recorded).
  bool done() const;
  // Blocks the host until the recorded work has finished.
  void synchronize() const;

  // Milliseconds of device time from `start` to `end`, both timed (EventTiming::on) and recorded
  // on streams of one device; blocks until `end` has finished. An error names what is missing
  // (CPU events, which record nothing, have no time either).
  static double elapsed_ms(const Event& start, const Event& end);

  EventTiming timing() const { return timing_; }
  Device device() const { return device_; }
  void* native() const { return native_; }  // a cudaEvent_t, nullptr until recorded on a device

 private:
  void reset();
  Device device_;
  void* native_ = nullptr;
  EventTiming timing_ = EventTiming::off;
};

// Copies `bytes` dense bytes on `stream`, in its order, and returns without waiting for the
// device. Host memory involved must stay valid and unchanged until the stream has passed the
// copy (record an Event, or synchronize): with pinned host memory the copy is a real DMA that
// runs while the host goes on. `stream` must belong to the device side of the copy (for a
// device-to-device copy, either one's device). CPU to CPU on the CPU stream is a memcpy.
void copy_async(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                const Stream& stream);

// Declares that `storage` (device memory from the allocator) is used by work on `stream`
// besides its allocation stream: its release then waits for the work issued on `stream` until
// the release (see the model above). A no-op for CPU storage and for memory the allocator does
// not own (wrapped foreign buffers).
void record_stream(const Storage& storage, const Stream& stream);

// How a device backend implements streams and events; registered at start-up (as the CUDA
// backend registers its DeviceMemoryOps), so core never links against it. Every entry but
// destroy_event may throw braid::Error.
struct StreamOps {
  // The device's stream of `role`, created on first use.
  void* (*get)(int device_index, StreamRole role) = nullptr;
  void (*synchronize)(void* stream, int device_index) = nullptr;
  bool (*done)(void* stream, int device_index) = nullptr;
  void* (*create_event)(int device_index, EventTiming timing) = nullptr;
  void (*destroy_event)(void* event, int device_index) = nullptr;  // never throws
  void (*record)(void* event, void* stream, int device_index) = nullptr;
  void (*wait)(void* stream, int stream_device_index, void* event) = nullptr;
  bool (*event_done)(void* event, int device_index) = nullptr;
  void (*event_synchronize)(void* event, int device_index) = nullptr;
  // Milliseconds between two finished timed events of device `device_index`.
  float (*elapsed_ms)(void* start, void* end, int device_index) = nullptr;
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
               void* stream, int device_index) = nullptr;
};
// Registers (or, with default-constructed ops, unregisters) `kind`'s stream implementation.
void register_stream_ops(DeviceKind kind, StreamOps ops);
// The registered ops for `kind`, or an error saying the backend is not compiled in.
const StreamOps& stream_ops(DeviceKind kind);

}  // namespace braid
