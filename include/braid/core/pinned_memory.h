// Page-locked ("pinned") host memory: a device copies to and from it by DMA while the host goes
// on (copy_async on a copy stream), where a copy with pageable memory is staged by the driver
// and does not overlap. A device backend supplies the allocation (PinnedMemoryOps, registered at
// start-up as its DeviceMemoryOps are), so core never links against it.
//
// Pinned memory is a cpu Storage like any host buffer: tensors on it are host tensors. It is
// costly to allocate (the pages are locked one by one) and takes memory from the OS for good
// while held, so callers keep their buffers for reuse (checkpoint images, staging rings) rather
// than allocating per copy. Nothing here caches freed blocks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/core/device.h"
#include "braid/core/storage.h"
#include "braid/core/tensor.h"

namespace braid {

// How a backend allocates page-locked host memory usable by every device of its kind.
struct PinnedMemoryOps {
  void* (*allocate)(size_t bytes) = nullptr;  // may throw braid::Error; never returns null
  void (*release)(void* ptr) = nullptr;       // never throws
};
// Registers (or, with default-constructed ops, unregisters) `kind`'s pinned allocation.
void register_pinned_memory(DeviceKind kind, PinnedMemoryOps ops);
bool has_pinned_memory(DeviceKind kind);

// `bytes` of host memory (a cpu Storage) that devices of `for_device`'s kind copy to and from by
// DMA (cudaHostAlloc's memory is page aligned; the SIMT emulator's, 64-byte aligned). For the
// CPU, which has nothing to copy by DMA, ordinary host memory from the counted allocator.
// Throws when `for_device`'s backend is not compiled in.
StoragePtr pinned_storage(size_t bytes, Device for_device);
// A dense host tensor on pinned_storage.
Tensor pinned_empty(const Shape& shape, DType dtype, Device for_device);
// True when `storage` is pinned memory from pinned_storage for a device.
bool is_pinned(const Storage& storage);

struct PinnedMemoryStats {
  int64_t current_bytes = 0;  // pinned memory held now, all backends
  int64_t peak_bytes = 0;
  int64_t allocations = 0;  // since the process started
};
PinnedMemoryStats pinned_memory_stats();

}  // namespace braid
