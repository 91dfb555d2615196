// The CUDA backend's pinned host memory (cudaHostAlloc) and device count, handed to braid core
// (braid/core/pinned_memory.h, braid/core/device_count.h).
#pragma once

#include <cstddef>

namespace braid::cuda {

// Page-locked host memory the device copies from and to by DMA; throws braid::Error when the
// driver refuses. On the SIMT emulator (which has no pinned memory, and runs every copy when
// it is issued) plain aligned host memory.
void* pinned_allocate(size_t bytes);
void pinned_release(void* ptr);
// Registers the two above and cuda::device_count with braid core. Idempotent, touches no CUDA
// API (safe without a driver).
void register_pinned_memory_ops();

}  // namespace braid::cuda
