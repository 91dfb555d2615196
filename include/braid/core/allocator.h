// Aligned host allocation with live and peak byte counters (the Trainer reports peak memory), and
// the seam through which a device backend supplies device memory and its statistics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/core/device.h"

namespace braid {

// Every host tensor buffer is aligned to this many bytes (a cache line, and AVX-512 friendly).
inline constexpr size_t kHostAlignment = 64;

void* host_allocate(size_t bytes);
void host_free(void* ptr, size_t bytes);

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocations = 0;
};

MemoryStats host_memory_stats();

// A device allocator's counters (the Trainer's metrics line shows them). Bytes are exact: the
// caching allocator's block sizes add up to allocated_bytes and its segments to reserved_bytes.
struct DeviceMemoryStats {
  int64_t allocated_bytes = 0;       // in blocks handed out (each rounded to the size class)
  int64_t requested_bytes = 0;       // what callers asked for, before rounding
  int64_t reserved_bytes = 0;        // held from the device (cudaMalloc'd segments), cached or not
  int64_t peak_allocated_bytes = 0;  // since start or reset_device_peak
  int64_t peak_reserved_bytes = 0;
  int64_t active_blocks = 0;
  int64_t segments = 0;
  int64_t device_mallocs = 0;  // successful cudaMalloc calls (none in a steady-state step)
  int64_t device_frees = 0;    // cudaFree calls
  int64_t alloc_retries = 0;   // a cudaMalloc failed, the cache was released and it was retried
  int64_t ooms = 0;            // requests that failed after that retry
};

// How a device backend (CUDA) allocates and copies; registered by that backend at start-up so
// core never links against it. `copy` moves dense bytes between any two devices and returns
// once host memory involved may be used. The other entries are optional (nullptr: no-ops).
struct DeviceMemoryOps {
  void* (*allocate)(size_t bytes, int device_index) = nullptr;
  void (*release)(void* ptr, int device_index) = nullptr;
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device,
               size_t bytes) = nullptr;
  DeviceMemoryStats (*stats)(int device_index) = nullptr;
  void (*empty_cache)(int device_index) = nullptr;
  void (*reset_peak)(int device_index) = nullptr;
  // `ptr` (an allocation's start) is used by work on `stream` (a native stream handle) besides
  // the stream it was allocated on: its release waits for that work (braid/core/stream.h).
  void (*record_stream)(void* ptr, int device_index, void* stream) = nullptr;
  // The device's own count of free and total bytes (CUDA: cudaMemGetInfo).
  void (*memory_info)(int device_index, size_t* free, size_t* total) = nullptr;
};
void register_device_memory(DeviceKind kind, DeviceMemoryOps ops);
// The registered ops for `kind`, or an error saying the backend is not compiled in.
const DeviceMemoryOps& device_memory(DeviceKind kind);

// The allocator statistics of `device`. On the CPU: the host allocator's live bytes as both
// allocated and reserved (its block cache is not counted), its peak, and its allocation count.
DeviceMemoryStats device_memory_stats(Device device);
// Free and total bytes as the device reports them (memory other processes hold is not free; the
// bytes cached in braid's allocator are not free either). -1 for both on the CPU or when the
// backend cannot tell.
struct DeviceMemoryInfo {
  int64_t free_bytes = -1;
  int64_t total_bytes = -1;
};
DeviceMemoryInfo device_memory_info(Device device);
// Gives cached, unused device memory back to the device (other processes and libraries can
// then use it); the next steps allocate afresh. A no-op on the CPU.
void empty_device_cache(Device device);
// Restarts the peak counters of `device` from the current values (the CPU: reset_host_peak).
void reset_device_peak(Device device);
// Restarts peak tracking from the current live size (e.g. at the start of a measured step).
void reset_host_peak();

}  // namespace braid
