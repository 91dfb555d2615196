// CUDA runtime plumbing: device count, device guard, scratch memory and the device-memory ops
// that braid core calls for cuda Storage and host<->device copies (the streams: cuda_streams.cpp).
#include "cuda_runtime.cuh"

#include "braid/core/allocator.h"
#include "braid/ops/kernel_registry.h"
#include "caching_allocator.h"
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

ScratchBuffer::ScratchBuffer(size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  BRAID_CUDA_CHECK(cudaGetDevice(&device_));
  ptr_ = device_allocator(device_).allocate(bytes, stream);
}

ScratchBuffer::~ScratchBuffer() {
  // The kernels that use the buffer are queued on its stream, before any later user of the
  // same pool: releasing at once is stream-ordered.
  if (ptr_ != nullptr) device_allocator(device_).release(ptr_);
}

void* allocate(size_t bytes, int device_index) {
  if (bytes == 0) return nullptr;
  DeviceGuard guard(device_index);  // the clear "no CUDA device" error comes from here
  return device_allocator(device_index)
      .allocate(bytes, device_stream(device_index, StreamRole::compute));
}

void release(void* ptr, int device_index) {
  if (ptr == nullptr) return;
  try {
    device_allocator(device_index).release(ptr);
  } catch (...) {
    // Only an impossible device index throws here; a destructor must not.
  }
}

namespace {

// Between two devices: the source's compute stream may still be writing `src`, and the
// source's allocator may hand `src` out again as soon as this returns. So the copy runs on the
// destination's compute stream after an event of the source's, and is waited for. Rare (a
// tensor moved between GPUs), so the simple, synchronous way.
void copy_between_devices(void* dst, int dst_index, const void* src, int src_index, size_t bytes) {
  cudaEvent_t written = nullptr;
  {
    DeviceGuard guard(src_index);
    BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    BRAID_CUDA_CHECK(cudaEventRecord(written, device_stream(src_index, StreamRole::compute)));
  }
  DeviceGuard guard(dst_index);
  cudaStream_t stream = device_stream(dst_index, StreamRole::compute);
  const cudaError_t waited = cudaStreamWaitEvent(stream, written, 0);
  const cudaError_t copied =
      waited == cudaSuccess ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) : waited;
  const cudaError_t done = copied == cudaSuccess ? cudaStreamSynchronize(stream) : copied;
  (void)cudaEventDestroy(written);
  BRAID_CHECK(done == cudaSuccess, "copying {} bytes from cuda:{} to cuda:{} failed: {}", bytes,
              src_index, dst_index, describe_status(done));
}

}  // namespace

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  BRAID_CHECK(!dst_device.is_cpu() || !src_device.is_cpu(),
              "cuda copy called for a host-to-host copy");
  if (!dst_device.is_cpu() && !src_device.is_cpu() && dst_device.index != src_device.index) {
    copy_between_devices(dst, dst_device.index, src, src_device.index, bytes);
    return;
  }
  const Device on = dst_device.is_cpu() ? src_device : dst_device;
  DeviceGuard guard(on.index);
  // On the compute stream, after every kernel issued before it; cudaMemcpyDefault lets unified
  // addressing pick the direction. With host memory involved the stream is waited for, so the
  // host may read (or reuse) its buffer on return, as the caller was promised, whether that
  // buffer is pageable or pinned.
  cudaStream_t stream = device_stream(on.index, StreamRole::compute);
  BRAID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  if (dst_device.is_cpu() || src_device.is_cpu()) BRAID_CUDA_CHECK(cudaStreamSynchronize(stream));
}

namespace {

DeviceMemoryStats stats_of(int device_index) {
  return device_allocator(device_index).stats();
}
void empty_cache_of(int device_index) {
  device_allocator(device_index).empty_cache();
}
void reset_peak_of(int device_index) {
  device_allocator(device_index).reset_peak();
}
void record_stream_of(void* ptr, int device_index, void* stream) {
  device_allocator(device_index).record_stream(ptr, static_cast<cudaStream_t>(stream));
}
void memory_info_of(int device_index, size_t* free, size_t* total) {
  cuda_allocator_backend().memory_info(device_index, free, total);
}

}  // namespace

void register_device_memory_ops() {
  DeviceMemoryOps ops;
  ops.allocate = &allocate;
  ops.release = &release;
  ops.copy = &copy;
  ops.stats = &stats_of;
  ops.empty_cache = &empty_cache_of;
  ops.reset_peak = &reset_peak_of;
  ops.record_stream = &record_stream_of;
  ops.memory_info = &memory_info_of;
  register_device_memory(DeviceKind::cuda, ops);
  // Streams go with memory: record_stream and copy_async are meaningless without them, and
  // the kernel table's registration calls only this function.
  register_stream_ops();
}

}  // namespace braid::cuda
