// The CUDA streams and events behind braid/core/stream.h: per device a compute, a copy and a
// communication stream, all non-blocking, created on first use and kept for the process.
#include <atomic>
#include <mutex>

#include "braid/core/error.h"
#include "cuda_check.cuh"
#include "cuda_runtime.cuh"

namespace braid::cuda {
namespace {

constexpr int kMaxDevices = 64;

std::mutex g_create_mutex;
std::atomic<cudaStream_t> g_streams[kMaxDevices][kNumStreamRoles] = {};

cudaStream_t create_stream(int device_index, StreamRole role) {
  std::lock_guard lock(g_create_mutex);
  std::atomic<cudaStream_t>& slot = g_streams[device_index][static_cast<int>(role)];
  if (cudaStream_t existing = slot.load(std::memory_order_acquire)) return existing;
  DeviceGuard guard(device_index);  // a stream belongs to the device current at its creation
  cudaStream_t stream = nullptr;
  // Non-blocking: the legacy default stream (which other libraries may use) never waits for
  // braid's work nor braid's for its; the three streams order each other through events only.
  // Never destroyed: destroying streams at exit races the runtime's own teardown.
  BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  slot.store(stream, std::memory_order_release);
  return stream;
}

// cudaStreamQuery / cudaEventQuery: true when done. cudaErrorNotReady is only an answer, but
// the runtime also records it as the last error, which is cleared so no later check sees it.
bool finished(cudaError_t status, const char* what) {
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  BRAID_CHECK(status == cudaSuccess, "{} failed: {}", what, describe_status(status));
  return true;
}

void* get_stream(int device_index, StreamRole role) {
  return device_stream(device_index, role);
}

void synchronize_stream(void* stream, int device_index) {
  DeviceGuard guard(device_index);
  BRAID_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

bool stream_done(void* stream, int device_index) {
  DeviceGuard guard(device_index);
  return finished(cudaStreamQuery(static_cast<cudaStream_t>(stream)), "cudaStreamQuery");
}

void* create_event(int device_index, EventTiming timing) {
  DeviceGuard guard(device_index);
  cudaEvent_t event = nullptr;
  // Ordering-only events skip the timestamp, which makes them cheaper to record and wait for.
  BRAID_CUDA_CHECK(cudaEventCreateWithFlags(
      &event, timing == EventTiming::on ? cudaEventDefault : cudaEventDisableTiming));
  return event;
}

void destroy_event(void* event, int device_index) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device_index) (void)cudaSetDevice(device_index);
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
  if (previous >= 0 && previous != device_index) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();  // at exit the runtime may be gone: nothing to report
}

void record_event(void* event, void* stream, int device_index) {
  DeviceGuard guard(device_index);
  BRAID_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void wait_event(void* stream, int stream_device_index, void* event) {
  DeviceGuard guard(stream_device_index);
  BRAID_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

bool event_done(void* event, int device_index) {
  DeviceGuard guard(device_index);
  return finished(cudaEventQuery(static_cast<cudaEvent_t>(event)), "cudaEventQuery");
}

void event_synchronize(void* event, int device_index) {
  DeviceGuard guard(device_index);
  BRAID_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

float elapsed_ms(void* start, void* end, int device_index) {
  DeviceGuard guard(device_index);
  float ms = 0;
  BRAID_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

void copy_on_stream(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                    void* stream, int device_index) {
  DeviceGuard guard(device_index);
  // cudaMemcpyDefault: unified addressing tells the direction (and a peer copy's devices).
  BRAID_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
}

}  // namespace

cudaStream_t device_stream(int device_index, StreamRole role) {
  BRAID_CHECK(device_index >= 0 && device_index < kMaxDevices, "cuda:{} is past braid's {} devices",
              device_index, kMaxDevices);
  cudaStream_t stream =
      g_streams[device_index][static_cast<int>(role)].load(std::memory_order_acquire);
  return stream != nullptr ? stream : create_stream(device_index, role);
}

cudaStream_t current_stream() {
  int device = 0;
  BRAID_CUDA_CHECK(cudaGetDevice(&device));
  return device_stream(device, StreamRole::compute);
}

void register_stream_ops() {
  StreamOps ops;
  ops.get = &get_stream;
  ops.synchronize = &synchronize_stream;
  ops.done = &stream_done;
  ops.create_event = &create_event;
  ops.destroy_event = &destroy_event;
  ops.record = &record_event;
  ops.wait = &wait_event;
  ops.event_done = &event_done;
  ops.event_synchronize = &event_synchronize;
  ops.elapsed_ms = &elapsed_ms;
  ops.copy = &copy_on_stream;
  braid::register_stream_ops(DeviceKind::cuda, ops);
}

}  // namespace braid::cuda
