// The CUDA backend's runtime plumbing: device memory for Storage, the stream every kernel runs
// on, device selection, per-op scratch memory and the device count.
//
// Plain C++ (no kernel syntax), so host code and tests compiled by the C++ compiler include it.
//
// Stream model (kept deliberately simple): every braid kernel, cuBLAS call and copy is issued
// on the default stream of the current device. Work is therefore ordered exactly as the host
// issues it, copies to and from the host are synchronous, and freeing memory needs no event
// bookkeeping. A side stream (checkpoint copies, NCCL) must order itself against it with events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "braid/core/device.h"

namespace braid::cuda {

// Number of visible CUDA devices; 0 when there is no device or no usable driver. Never throws
// and never aborts, so tests and binaries can ask before touching anything else.
int device_count();

// Fills the kernel table (CPU and CUDA) and registers the CUDA device-memory ops. Idempotent.
// Registration otherwise happens on the first kernel lookup; call this before the first
// Tensor::empty on a cuda device in code that has not looked a kernel up yet.
void ensure_registered();

// The stream braid issues work on: the default stream (see the stream model above).
cudaStream_t current_stream();

// Makes `device_index` the current device for its scope and restores the previous one. Throws
// a clear error when that device does not exist (including "no CUDA device at all").
class DeviceGuard {
 public:
  explicit DeviceGuard(int device_index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int current_ = -1;
};

// Temporary device memory for one op (reduction partials and the like). Stream-ordered
// (cudaMallocAsync / cudaFreeAsync on `stream`), so it is cheap, needs no device-wide
// synchronisation, and two ops can never hand each other a buffer that is still in use.
// Create it inside a DeviceGuard; it lives on the device current at construction.
class ScratchBuffer {
 public:
  ScratchBuffer(size_t bytes, cudaStream_t stream);
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool async_ = true;  // false where the device has no memory pools (then cudaMalloc)
};

// The DeviceMemoryOps braid core calls for cuda Storage and host<->device copies.
// allocate: cudaMalloc on that device (throws with free/total memory on failure).
void* allocate(size_t bytes, int device_index);
// release: cudaFree; never throws (it runs from Storage's destructor, possibly at exit).
void release(void* ptr, int device_index);
// copy: dense bytes between any two devices; returns once host memory involved is safe to use.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Hands the three functions above to braid core (register_device_memory). Idempotent.
void register_device_memory_ops();

}  // namespace braid::cuda
