// cudaHostAlloc behind braid core's PinnedMemoryOps, and the device count behind device_count.
#include "pinned_memory.h"

#include <cstdlib>

#include "braid/core/device_count.h"
#include "braid/core/error.h"
#include "braid/core/pinned_memory.h"
#include "cuda_runtime.cuh"

namespace braid::cuda {

void* pinned_allocate(size_t bytes) {
#ifdef BRAID_SIMT
  // The emulator runs each copy as it is issued, so any host memory serves.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  BRAID_CHECK(p != nullptr, "out of host memory allocating {} pinned bytes", bytes);
  return p;
#else
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  BRAID_CHECK(e == cudaSuccess, "cudaHostAlloc of {} bytes failed: {}", bytes,
              cudaGetErrorString(e));
  return p;
#endif
}

void pinned_release(void* ptr) {
#ifdef BRAID_SIMT
  std::free(ptr);
#else
  (void)cudaFreeHost(ptr);  // at exit the driver may be gone; nothing to do about it then
#endif
}

void register_pinned_memory_ops() {
  register_pinned_memory(DeviceKind::cuda, {&pinned_allocate, &pinned_release});
  register_device_count(DeviceKind::cuda, &device_count);
}

}  // namespace braid::cuda
