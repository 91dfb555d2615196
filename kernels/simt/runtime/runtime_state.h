// What the emulated runtime's files share: error recording, the current device, and stream
// lookup and issue. Internal to kernels/simt/runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace braid::simt::rt {

// Records `error` as the calling thread's last error unless it is cudaSuccess; returns it, so a
// call ends with `return record(...)`. Sticky errors (set_launch_error) stay for every thread.
cudaError_t record(cudaError_t error);
// The sticky error, or cudaSuccess: calls that touch the device return it once it is set.
cudaError_t sticky_error();

// The calling thread's current device (0 until cudaSetDevice), always valid.
int current_device();
void set_current_device(int device);

// The device `stream` belongs to (nullptr, cudaStreamLegacy and cudaStreamPerThread: the
// current device's); false for a stream that is not live.
bool resolve_stream(cudaStream_t stream, int* device);

// Runs `work` now, in the order of `stream` (one device's work at a time, from any thread):
// cudaErrorInvalidResourceHandle for a dead stream, the sticky error once set, else cudaSuccess.
// Exceptions from `work` (a KernelFault) propagate.
cudaError_t issue(cudaStream_t stream, const std::function<void()>& work);

// Forgets per-device state when the device configuration changes (tests).
void reset_memory_accounting();
void reset_kernel_attributes();

}  // namespace braid::simt::rt
