// Aligned host allocation with live and peak byte counters (the Trainer reports peak memory).
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

// How a device backend (CUDA) allocates and copies; registered by that backend at start-up so
// core never links against it. `copy` moves dense bytes between any two devices.
struct DeviceMemoryOps {
  void* (*allocate)(size_t bytes, int device_index) = nullptr;
  void (*release)(void* ptr, int device_index) = nullptr;
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device,
               size_t bytes) = nullptr;
};
void register_device_memory(DeviceKind kind, DeviceMemoryOps ops);
// The registered ops for `kind`, or an error saying the backend is not compiled in.
const DeviceMemoryOps& device_memory(DeviceKind kind);
// Restarts peak tracking from the current live size (e.g. at the start of a measured step).
void reset_host_peak();

}  // namespace braid
