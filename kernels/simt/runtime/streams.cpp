// The emulated runtime's streams and events, and stream order: every operation runs when it is
// issued, one device's work at a time, so a stream's work is done when its call returns.
#include <cuda_runtime_api.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>

#include "runtime_state.h"
#include "simt/emulated_device.h"
#include "simt/runtime_hooks.h"

namespace braid::simt::cudart {

struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
};

struct CUevent_st {
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

}  // namespace braid::simt::cudart

namespace braid::simt::rt {
namespace {

using cudart::CUevent_st;
using cudart::CUstream_st;

constexpr int kMaxDevices = 16;

// Held while a device runs an operation. Another thread's query finds it taken (work in flight:
// cudaErrorNotReady) and its synchronize waits for it; recursive, as a cuBLAS call's work may
// issue more.
std::recursive_mutex g_device_order[kMaxDevices];

std::mutex g_handles;  // the live streams and events; a handle is looked up before every use
std::set<CUstream_st*> g_streams;
std::set<CUevent_st*> g_events;

bool is_special(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

// Copies what a call needs of a live event; false for an event that is not live.
bool find_event(cudaEvent_t event, CUevent_st* out) {
  std::lock_guard lock(g_handles);
  if (event == nullptr || g_events.count(event) == 0) return false;
  *out = *event;
  return true;
}

// cudaErrorNotReady while another thread runs work on `device`.
cudaError_t query_device(int device) {
  std::unique_lock order(g_device_order[device], std::try_to_lock);
  return order.owns_lock() ? cudaSuccess : cudaErrorNotReady;
}

void wait_device(int device) {
  std::lock_guard order(g_device_order[device]);
}

}  // namespace

bool resolve_stream(cudaStream_t stream, int* device) {
  int found = 0;
  if (is_special(stream)) {
    found = current_device();
  } else {
    std::lock_guard lock(g_handles);
    if (g_streams.count(stream) == 0) return false;
    found = stream->device;
  }
  if (device != nullptr) *device = found;
  return true;
}

cudaError_t issue(cudaStream_t stream, const std::function<void()>& work) {
  int device = 0;
  if (!resolve_stream(stream, &device)) return cudaErrorInvalidResourceHandle;
  if (const cudaError_t sticky = sticky_error()) return sticky;
  std::lock_guard order(g_device_order[device]);
  work();
  return cudaSuccess;
}

}  // namespace braid::simt::rt

namespace braid::simt {

void run_on_stream(void* stream, const std::function<void()>& work) {
  const cudaError_t error = rt::issue(static_cast<cudaStream_t>(stream), work);
  if (error == cudaErrorInvalidResourceHandle)
    set_launch_error(error, "launch into a stream that is not live (destroyed or never created)");
  else
    rt::record(error);  // the sticky error, when set: the launch did not run
}

}  // namespace braid::simt

namespace rt = braid::simt::rt;
using braid::simt::cudart::CUevent_st;
using braid::simt::cudart::CUstream_st;

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  rt::wait_device(rt::current_device());
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  if (pStream == nullptr || (flags & ~unsigned{cudaStreamNonBlocking}) != 0)
    return rt::record(cudaErrorInvalidValue);
  auto* stream = new CUstream_st{rt::current_device(), flags};
  std::lock_guard lock(rt::g_handles);
  rt::g_streams.insert(stream);
  *pStream = stream;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  int device = 0;
  if (rt::is_special(stream) || !rt::resolve_stream(stream, &device))
    return rt::record(cudaErrorInvalidResourceHandle);
  rt::wait_device(device);  // CUDA lets pending work finish; the emulator has none but in flight
  std::lock_guard lock(rt::g_handles);
  if (rt::g_streams.erase(stream) == 0) return rt::record(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  int device = 0;
  if (!rt::resolve_stream(stream, &device)) return rt::record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  rt::wait_device(device);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  int device = 0;
  if (!rt::resolve_stream(stream, &device)) return rt::record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  return rt::record(rt::query_device(device));  // NotReady is recorded too, as CUDA does
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  CUevent_st e;
  if (!rt::resolve_stream(stream, nullptr) || !rt::find_event(event, &e))
    return rt::record(cudaErrorInvalidResourceHandle);
  if ((flags & ~unsigned{cudaEventWaitExternal}) != 0) return rt::record(cudaErrorInvalidValue);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  // The work the event captured finished before its record returned: nothing to wait for.
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  constexpr unsigned kKnown =
      cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnown) != 0) return rt::record(cudaErrorInvalidValue);
  // An interprocess event must be created without timing, as CUDA requires.
  if ((flags & cudaEventInterprocess) != 0 && (flags & cudaEventDisableTiming) == 0)
    return rt::record(cudaErrorInvalidValue);
  auto* created = new CUevent_st{rt::current_device(), flags, false, {}};
  std::lock_guard lock(rt::g_handles);
  rt::g_events.insert(created);
  *event = created;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard lock(rt::g_handles);
  if (event == nullptr || rt::g_events.erase(event) == 0)
    return rt::record(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  CUevent_st e;
  if (!rt::find_event(event, &e) || !rt::resolve_stream(stream, nullptr))
    return rt::record(cudaErrorInvalidResourceHandle);
  return rt::record(rt::issue(stream, [&] {
    std::lock_guard lock(rt::g_handles);
    if (rt::g_events.count(event) == 0) return;  // destroyed meanwhile by another thread
    event->recorded = true;
    event->time = std::chrono::steady_clock::now();
  }));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  CUevent_st e;
  if (!rt::find_event(event, &e)) return rt::record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  // Never recorded: cudaSuccess, as CUDA documents.
  return e.recorded ? rt::record(rt::query_device(e.device)) : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  CUevent_st e;
  if (!rt::find_event(event, &e)) return rt::record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  if (e.recorded) rt::wait_device(e.device);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return rt::record(cudaErrorInvalidValue);
  CUevent_st a, b;
  if (!rt::find_event(start, &a) || !rt::find_event(end, &b))
    return rt::record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  // Events without timing, or never recorded, have no time to subtract.
  if (((a.flags | b.flags) & cudaEventDisableTiming) != 0 || !a.recorded || !b.recorded)
    return rt::record(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b.time - a.time).count();
  return cudaSuccess;
}
