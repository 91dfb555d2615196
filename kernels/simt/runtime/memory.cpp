// The emulated runtime's memory calls: allocation with per-device accounting (and a test limit),
// copies and memsets that check device ranges against live allocations and keep the
// initialisation shadow, and the call counters tests read (runtime_call_counts).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "runtime_state.h"
#include "simt/device_memory.h"
#include "simt/emulated_device.h"

namespace braid::simt::rt {
namespace {

struct Owned {
  int device = 0;
  size_t bytes = 0;  // as counted against the device: rounded to cudaMalloc's 256 bytes
};

std::mutex g_mutex;
std::map<const void*, Owned> g_owned;  // every live cudaMalloc'd pointer
std::vector<size_t> g_used;            // bytes per device
size_t g_limit = 0;                    // set_emulated_memory_limit; 0: the model's memory

// runtime_call_counts(), in the field order of RuntimeCallCounts.
std::atomic<uint64_t> g_mallocs{0}, g_frees{0}, g_mallocs_async{0}, g_frees_async{0};
std::atomic<uint64_t> g_legacy_stream_ops{0};

// What a device holds (the caller holds g_mutex).
size_t capacity_locked() {
  const size_t model = emulated_device_model().global_memory;
  return g_limit != 0 && g_limit < model ? g_limit : model;
}

void count_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy) g_legacy_stream_ops.fetch_add(1);
}

size_t counted(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

size_t& used(int device) {
  if (g_used.size() <= static_cast<size_t>(device)) g_used.resize(device + 1, 0);
  return g_used[device];
}

cudaError_t allocate(int device, size_t size, void** out) {
  const size_t bytes = counted(size);
  {
    // Each device has its model's memory; the arena holds all of them.
    std::lock_guard lock(g_mutex);
    if (size > capacity_locked() || used(device) + bytes > capacity_locked())
      return record(cudaErrorMemoryAllocation);
    used(device) += bytes;
  }
  void* ptr = device_allocate(size);
  std::lock_guard lock(g_mutex);
  if (ptr == nullptr) {
    used(device) -= bytes;
    return record(cudaErrorMemoryAllocation);
  }
  g_owned[ptr] = Owned{device, bytes};
  *out = ptr;
  return cudaSuccess;
}

cudaError_t release(void* ptr) {
  {
    std::lock_guard lock(g_mutex);
    auto it = g_owned.find(ptr);
    if (it == g_owned.end()) return record(cudaErrorInvalidValue);  // not a cudaMalloc'd start
    used(it->second.device) -= it->second.bytes;
    g_owned.erase(it);
  }
  device_free(ptr);
  return cudaSuccess;
}

bool is_device(const void* ptr) {
  return in_device_arena(ptr);
}

// A device range must lie inside one live allocation, as CUDA requires of the pointers it is
// given (an invalid one is cudaErrorInvalidValue).
bool valid_device_range(const void* ptr, size_t bytes) {
  return find_allocation(ptr, bytes) != nullptr;
}

// Checks the pointers of a copy against its kind. With an explicit kind each pointer must be on
// the side the kind names (CUDA leaves a mismatch undefined; the emulator rejects it, which is
// what catches a host buffer passed as a device one). Sets whether each side is device memory.
cudaError_t check_kind(void* dst, const void* src, cudaMemcpyKind kind, bool* dst_device,
                       bool* src_device) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  *dst_device = is_device(dst);
  *src_device = is_device(src);
  if (kind == cudaMemcpyDefault) return cudaSuccess;
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  return *dst_device == want_dst && *src_device == want_src ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  bool dst_device = false, src_device = false;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  if (count == 0) return cudaSuccess;
  if (const cudaError_t e = check_kind(dst, src, kind, &dst_device, &src_device)) return e;
  if (dst_device && !valid_device_range(dst, count)) return cudaErrorInvalidValue;
  if (src_device && !valid_device_range(src, count)) return cudaErrorInvalidValue;
  // CUDA requires the areas not to overlap; a device-to-device overlap is rejected here (host
  // overlaps are ASan's to report, through memcpy).
  const char* d = static_cast<const char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (dst_device && src_device && d < s + count && s < d + count) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// One contiguous copy; device bytes are reached through a DeviceAccess and the shadow follows
// them (a host source counts as written; reading unwritten device bytes back to the host is
// allowed, since a host may copy a partly written buffer).
void copy_bytes(void* dst, const void* src, size_t count) {
  if (count == 0) return;
  if (!is_device(dst) && !is_device(src)) {
    std::memcpy(dst, src, count);
    return;
  }
  DeviceAccess access;
  std::memcpy(dst, src, count);
  if (is_device(dst)) copy_initialization(dst, src, count);
}

void set_bytes(void* ptr, int value, size_t count) {
  DeviceAccess access;
  std::memset(ptr, static_cast<unsigned char>(value), count);
  mark_initialized(ptr, count);
}

cudaError_t check_memset(void* ptr, size_t count) {
  if (count == 0) return cudaSuccess;
  if (ptr == nullptr || !valid_device_range(ptr, count)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// The bytes a 2D area spans: height rows of width bytes, `pitch` apart.
size_t span_2d(size_t pitch, size_t width, size_t height) {
  return (height - 1) * pitch + width;
}

}  // namespace

void reset_memory_accounting() {
  std::lock_guard lock(g_mutex);
  g_used.clear();
}

}  // namespace braid::simt::rt

namespace braid::simt {

RuntimeCallCounts runtime_call_counts() {
  RuntimeCallCounts counts;
  counts.malloc = rt::g_mallocs.load();
  counts.free = rt::g_frees.load();
  counts.malloc_async = rt::g_mallocs_async.load();
  counts.free_async = rt::g_frees_async.load();
  counts.legacy_stream_ops = rt::g_legacy_stream_ops.load();
  return counts;
}

void set_emulated_memory_limit(size_t bytes) {
  std::lock_guard lock(rt::g_mutex);
  rt::g_limit = bytes;
}

}  // namespace braid::simt

namespace rt = braid::simt::rt;
namespace simt = braid::simt;

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  rt::g_mallocs.fetch_add(1);
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  if (devPtr == nullptr) return rt::record(cudaErrorInvalidValue);
  if (size == 0) {  // CUDA hands out no memory and a null pointer
    *devPtr = nullptr;
    return cudaSuccess;
  }
  return rt::allocate(rt::current_device(), size, devPtr);
}

cudaError_t cudaFree(void* devPtr) {
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  if (devPtr == nullptr) return cudaSuccess;
  rt::g_frees.fetch_add(1);
  return rt::release(devPtr);
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  rt::g_mallocs_async.fetch_add(1);
  if (devPtr == nullptr) return rt::record(cudaErrorInvalidValue);
  int device = 0;
  if (!rt::resolve_stream(hStream, &device)) return rt::record(cudaErrorInvalidResourceHandle);
  cudaError_t status = cudaSuccess;
  const cudaError_t issued = rt::issue(hStream, [&] {
    if (size == 0) {
      *devPtr = nullptr;
      return;
    }
    status = rt::allocate(device, size, devPtr);  // from the stream's device's pool
  });
  return issued != cudaSuccess ? rt::record(issued) : status;
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  if (devPtr != nullptr) rt::g_frees_async.fetch_add(1);
  if (!rt::resolve_stream(hStream, nullptr)) return rt::record(cudaErrorInvalidResourceHandle);
  cudaError_t status = cudaSuccess;
  const cudaError_t issued = rt::issue(hStream, [&] {
    if (devPtr != nullptr) status = rt::release(devPtr);
  });
  return issued != cudaSuccess ? rt::record(issued) : status;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  if (free == nullptr || total == nullptr) return rt::record(cudaErrorInvalidValue);
  std::lock_guard lock(rt::g_mutex);
  const size_t capacity = rt::capacity_locked();
  const size_t used = rt::used(rt::current_device());
  *total = capacity;
  *free = capacity > used ? capacity - used : 0;  // a limit set below what is allocated
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, count, kind, nullptr);  // the legacy stream, then returns
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!rt::resolve_stream(stream, nullptr)) return rt::record(cudaErrorInvalidResourceHandle);
  rt::count_stream(stream);
  if (const cudaError_t e = rt::check_copy(dst, src, count, kind)) return rt::record(e);
  return rt::record(rt::issue(stream, [&] { rt::copy_bytes(dst, src, count); }));
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (!rt::resolve_stream(stream, nullptr)) return rt::record(cudaErrorInvalidResourceHandle);
  rt::count_stream(stream);
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return rt::record(cudaErrorInvalidMemcpyDirection);
  if (width == 0 || height == 0) return cudaSuccess;
  // A row may not be wider than either pitch; a pitch past the device's memPitch is its own error.
  constexpr size_t kMaxPitch = 2147483647;
  if (dpitch > kMaxPitch || spitch > kMaxPitch) return rt::record(cudaErrorInvalidPitchValue);
  if (width > dpitch || width > spitch) return rt::record(cudaErrorInvalidValue);
  bool dst_device = false, src_device = false;
  if (const cudaError_t e = rt::check_kind(dst, src, kind, &dst_device, &src_device))
    return rt::record(e);
  if (dst_device && !rt::valid_device_range(dst, rt::span_2d(dpitch, width, height)))
    return rt::record(cudaErrorInvalidValue);
  if (src_device && !rt::valid_device_range(src, rt::span_2d(spitch, width, height)))
    return rt::record(cudaErrorInvalidValue);
  return rt::record(rt::issue(stream, [&] {
    simt::DeviceAccess access;  // once for all rows: opening the arena costs two mprotects
    for (size_t row = 0; row < height; ++row)
      rt::copy_bytes(static_cast<char*>(dst) + row * dpitch,
                     static_cast<const char*>(src) + row * spitch, width);
  }));
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  return cudaMemsetAsync(devPtr, value, count, nullptr);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (!rt::resolve_stream(stream, nullptr)) return rt::record(cudaErrorInvalidResourceHandle);
  rt::count_stream(stream);
  if (const cudaError_t e = rt::check_memset(devPtr, count)) return rt::record(e);
  if (count == 0) return rt::record(rt::issue(stream, [] {}));
  return rt::record(rt::issue(stream, [&] { rt::set_bytes(devPtr, value, count); }));
}

cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  if (!rt::resolve_stream(stream, nullptr)) return rt::record(cudaErrorInvalidResourceHandle);
  rt::count_stream(stream);
  if (width == 0 || height == 0) return rt::record(rt::issue(stream, [] {}));
  if (height > 1 && width > pitch) return rt::record(cudaErrorInvalidValue);  // pitch unused at 1
  const size_t span = height > 1 ? rt::span_2d(pitch, width, height) : width;
  if (const cudaError_t e = rt::check_memset(devPtr, span)) return rt::record(e);
  return rt::record(rt::issue(stream, [&] {
    simt::DeviceAccess access;
    for (size_t row = 0; row < height; ++row)
      rt::set_bytes(static_cast<char*>(devPtr) + row * pitch, value, width);
  }));
}
