// The stream-ordered caching allocator of device memory: every cuda Storage and per-op scratch
// buffer comes from it, so steady-state training steps make no cudaMalloc or cudaFree.
//
// Plain C++ on the CUDA runtime API, so the C++ compiler builds it and tests include it.
//
// Size classes. A request is rounded up to 512 bytes. Up to 1 MiB it is "small" and is carved
// from 2 MiB segments; above, it is "large" and is carved from segments rounded up to 2 MiB.
// A block handed out is split off its free block, the rest staying free in the pool (in the
// large pool a rest of 1 MiB or less serves no request, but it merges back into its neighbour
// when that is freed: freed neighbours in a segment always merge). So allocated_bytes is
// exactly the sum of the rounded requests, and reserved minus allocated is free. A request
// takes the smallest free block that fits (lowest address among equals), so a training step,
// which requests the same sizes in the same order every time, finds the blocks the previous
// step freed: after a warm-up step or two no segment is added.
//
// Streams. Every block belongs to the stream it was allocated for (cuda Storage: the device's
// compute stream; a ScratchBuffer: the stream it names). A freed block returns to that stream's
// pool and is handed out again to that stream only: work issued on the stream after the reuse
// runs after all work that used the memory before, without any synchronisation. A block that
// record_stream marked as used on other streams goes back to its pool only once an event
// recorded on each of them at release time has completed (checked, never waited for, at later
// allocations; waited for by empty_cache and before retrying a failed cudaMalloc).
//
// Out of memory: a failed cudaMalloc releases every cached segment that is entirely free and
// retries once; a second failure throws one line naming the request, what is allocated and
// reserved, the device's total, and the training knobs that lower memory.
//
// Thread-safe: one mutex per device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "braid/core/allocator.h"

namespace braid::cuda {

inline constexpr size_t kBlockRound = 512;
inline constexpr size_t kSmallBlockMax = size_t{1} << 20;
inline constexpr size_t kSmallSegmentBytes = size_t{2} << 20;
inline constexpr size_t kLargeSegmentRound = size_t{2} << 20;

// The size a request of `bytes` occupies in a cached block.
size_t rounded_block_size(size_t bytes);

// What the allocator needs from a device: the CUDA runtime in braid, stand-ins in tests (which
// decide when an event completes, or how much memory there is).
class AllocatorBackend {
 public:
  virtual ~AllocatorBackend() = default;
  // Device memory on `device`; on failure the status, with the runtime's last error cleared.
  virtual cudaError_t malloc(int device, size_t bytes, void** ptr) = 0;
  virtual void free(int device, void* ptr) = 0;  // never throws
  virtual cudaEvent_t create_event(int device) = 0;
  virtual void destroy_event(int device, cudaEvent_t event) = 0;  // never throws
  // false when the event could not be recorded (the runtime is shutting down): nothing to wait
  // for then. Never throws: it runs from Storage's destructor.
  virtual bool record(int device, cudaEvent_t event, cudaStream_t stream) = 0;
  // Whether the recorded work has finished; an error counts as finished (there is nothing left
  // to wait for), so it never throws.
  virtual bool ready(int device, cudaEvent_t event) = 0;
  virtual void synchronize(int device, cudaEvent_t event) = 0;  // never throws
  virtual void memory_info(int device, size_t* free, size_t* total) = 0;
};

// The CUDA runtime's backend (one for the process).
AllocatorBackend& cuda_allocator_backend();

struct CachingAllocatorOptions {
  // false ("direct"): no cache. Each block is a cudaMalloc of exactly the requested bytes,
  // given back (cudaFree) as soon as it is released and its events completed. For memory
  // checkers, which see only whole device allocations: the SIMT emulator's bounds,
  // use-after-free and initialisation checks, compute-sanitizer. Slow: cudaFree synchronises.
  bool cache = true;
};

class CachingAllocator {
 public:
  CachingAllocator(int device, AllocatorBackend& backend, CachingAllocatorOptions options = {});
  // Gives every segment back, including those of blocks still handed out (tests' instances).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `bytes` of device memory for work on `stream`; nullptr for 0 bytes. Throws braid::Error
  // when the device is out of memory (see above).
  void* allocate(size_t bytes, cudaStream_t stream);
  // Returns a block from allocate(). Never throws; a pointer it does not know is ignored.
  void release(void* ptr);
  // The block starting at `ptr` is used by work on `stream` too (see Streams above).
  void record_stream(void* ptr, cudaStream_t stream);
  // Gives every entirely free segment back to the device, after waiting for pending events.
  void empty_cache();

  DeviceMemoryStats stats() const;
  void reset_peak();
  void set_caching(bool cache);
  bool caching() const;
  int device() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Device `device`'s allocator, created on first use and never destroyed (Storage may be
// released from static destructors). Its caching follows default_caching().
CachingAllocator& device_allocator(int device);
// Whether device allocators cache: true unless BRAID_CUDA_ALLOCATOR=direct at the first use.
bool default_caching();
// Switches caching for every device allocator, present and future; returns the previous
// setting. Blocks handed out stay valid either way.
bool set_default_caching(bool cache);

// The out-of-memory line (exposed for tests of its wording).
std::string out_of_memory_message(int device, size_t request, const DeviceMemoryStats& stats,
                                  size_t device_free, size_t device_total, size_t released_segments,
                                  size_t released_bytes);

}  // namespace braid::cuda
