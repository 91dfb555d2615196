// CUDA runtime plumbing: device count, device guard, scratch memory and the device-memory ops
// that braid core calls for cuda Storage and host<->device copies.
#include "cuda_runtime.cuh"

#include "braid/core/allocator.h"
#include "braid/ops/kernel_registry.h"
#include "cuda_check.cuh"

namespace braid::cuda {

int device_count() {
  // Asked once: without a driver cudaGetDeviceCount fails (cudaErrorInsufficientDriver or
  // cudaErrorNoDevice) instead of aborting, and that failure means "no device" to us.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it, or the next checked call would report it
      return 0;
    }
    return n;
  }();
  return count;
}

void ensure_registered() {
  (void)ops::KernelRegistry::instance();  // its first use runs register_cuda_kernels
  register_device_memory_ops();
}

cudaStream_t current_stream() {
  return nullptr;
}

DeviceGuard::DeviceGuard(int device_index) {
  const int count = device_count();
  BRAID_CHECK(count > 0,
              "cuda:{} was requested but no CUDA device is available (no device, "
              "or no usable driver)",
              device_index);
  BRAID_CHECK(device_index >= 0 && device_index < count,
              "cuda:{} does not exist: {} CUDA device(s) are visible", device_index, count);
  BRAID_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device_index) BRAID_CUDA_CHECK(cudaSetDevice(device_index));
  current_ = device_index;
}

DeviceGuard::~DeviceGuard() {
  // A destructor must not throw; a failure to switch back leaves the other device current,
  // which the next DeviceGuard corrects anyway.
  if (previous_ >= 0 && previous_ != current_) (void)cudaSetDevice(previous_);
}

ScratchBuffer::ScratchBuffer(size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (bytes == 0) return;
  const cudaError_t status = cudaMallocAsync(&ptr_, bytes, stream);
  if (status == cudaErrorNotSupported) {
    // Devices without memory pools (some virtualised setups): plain, synchronising allocation.
    (void)cudaGetLastError();
    async_ = false;
    BRAID_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    return;
  }
  BRAID_CHECK(status == cudaSuccess, "scratch allocation of {} bytes failed: {}", bytes,
              describe_status(status));
}

ScratchBuffer::~ScratchBuffer() {
  if (ptr_ == nullptr) return;
  if (async_) {
    (void)cudaFreeAsync(ptr_, stream_);
  } else {
    (void)cudaFree(ptr_);
  }
}

void* allocate(size_t bytes, int device_index) {
  if (bytes == 0) return nullptr;
  DeviceGuard guard(device_index);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    BRAID_FAIL("cuda:{} could not allocate {} bytes: {} ({} of {} bytes free)", device_index, bytes,
               describe_status(status), free_bytes, total_bytes);
  }
  return ptr;
}

void release(void* ptr, int device_index) {
  if (ptr == nullptr) return;
  // Runs from Storage's destructor, possibly during process exit after the runtime has shut
  // down (cudaErrorCudartUnloading): errors are dropped, and cleared so no later check
  // reports them as its own.
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device_index) (void)cudaSetDevice(device_index);
  (void)cudaFree(ptr);
  if (previous >= 0 && previous != device_index) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  const Device on = dst_device.is_cpu() ? src_device : dst_device;
  BRAID_CHECK(!on.is_cpu(), "cuda copy called for a host-to-host copy");
  DeviceGuard guard(on.index);
  // cudaMemcpy runs on the default stream (after every kernel issued before it) and, for host
  // memory, returns only once the host buffer may be reused or read; cudaMemcpyDefault lets
  // unified addressing pick the direction, including device-to-device across devices.
  BRAID_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

void register_device_memory_ops() {
  register_device_memory(DeviceKind::cuda, DeviceMemoryOps{&allocate, &release, &copy});
}

}  // namespace braid::cuda
