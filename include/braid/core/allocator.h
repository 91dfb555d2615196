// Aligned host allocation with live and peak byte counters (the Trainer reports peak memory).
#pragma once

#include <cstddef>
#include <cstdint>

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
// Restarts peak tracking from the current live size (e.g. at the start of a measured step).
void reset_host_peak();

}  // namespace braid
