// The CUDA backend's runtime plumbing: device memory for Storage, the streams work runs on,
// device selection, per-op scratch memory and the device count.
//
// Plain C++ (no kernel syntax), so host code and tests compiled by the C++ compiler include it.
//
// Stream model: each device has three streams, created on first use with
// cudaStreamNonBlocking, so none synchronises implicitly with the legacy default stream or with
// each other (braid/core/stream.h is the device-agnostic face of them):
// - compute (current_stream()): every braid kernel, cuBLAS call and copy of an op. Work on it
//   runs in issue order, and device memory is allocated for it (caching_allocator.h), so a
//   block freed and reused on it needs no event.
// - copy: host<->device staging (batches ahead, checkpoint snapshots);
// - comm: collectives.
// Ordering between them goes only through events. Nothing is issued on the legacy default
// stream. The host<->device copies of the DeviceMemoryOps (Tensor::to, copy_, item) run on the
// compute stream and return once the host memory is ready (they synchronise that stream).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "braid/core/device.h"
#include "braid/core/stream.h"

namespace braid::cuda {

// Number of visible CUDA devices; 0 when there is no device or no usable driver. Never throws
// and never aborts, so tests and binaries can ask before touching anything else.
int device_count();

// Fills the kernel table (CPU and CUDA) and registers the CUDA device-memory and stream ops.
// Idempotent.
// Registration otherwise happens on the first kernel lookup; call this before the first
// Tensor::empty on a cuda device in code that has not looked a kernel up yet.
void ensure_registered();

// The current device's compute stream: what every kernel, cuBLAS call and op copy is issued on.
cudaStream_t current_stream();
// Device `device_index`'s stream of `role` (see the stream model above), created on first use.
cudaStream_t device_stream(int device_index, StreamRole role);

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

// Temporary device memory for one op (reduction partials and the like), from the caching
// allocator's pool of `stream`: cheap, no device-wide synchronisation, and stream order keeps
// two ops from ever handing each other a buffer that is still in use. Create it inside a
// DeviceGuard; it lives on the device current at construction.
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
  int device_ = 0;
};

// The DeviceMemoryOps braid core calls for cuda Storage and host<->device copies.
// allocate: the device's caching allocator, for its compute stream (throws on out of memory).
void* allocate(size_t bytes, int device_index);
// release: back to the caching allocator; never throws (it runs from Storage's destructor,
// possibly at exit).
void release(void* ptr, int device_index);
// copy: dense bytes between any two devices, on the compute stream; returns once host memory
// involved is safe to use (device-to-device on one device returns at once, stream-ordered).
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Hands the functions above, the allocator's statistics and record_stream to braid core
// (register_device_memory), and the streams (register_stream_ops). Idempotent.
void register_device_memory_ops();
// Hands the streams and events to braid core (braid::register_stream_ops). Idempotent.
void register_stream_ops();

}  // namespace braid::cuda
