// A temporary float buffer from the host allocator, freed when it goes out of scope.
#pragma once

#include <cstddef>

#include "braid/core/allocator.h"

namespace braid::ops::cpu {

// The host allocator keeps freed blocks for the next request of the same size, so a buffer made
// in every call of a training step does not fault fresh pages in each time, and its bytes show
// in the peak-memory counters.
struct HostScratch {
  explicit HostScratch(size_t floats)
      : bytes(floats * sizeof(float)), data(static_cast<float*>(host_allocate(bytes))) {}
  ~HostScratch() { host_free(data, bytes); }
  HostScratch(const HostScratch&) = delete;
  HostScratch& operator=(const HostScratch&) = delete;
  size_t bytes;
  float* data;
};

}  // namespace braid::ops::cpu
