// What the launcher needs from the emulated CUDA runtime: stream order, the sticky launch
// error, per-kernel shared memory limits and the device model.
//
// INTERFACE between the emulator's parts: implemented by the runtime (runtime/streams.cpp,
// errors.cpp, devices.cpp), called by the launcher (launch.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace braid::simt {

// Runs `work` in the order of stream `stream` (a cudaStream_t; nullptr: the legacy default
// stream) after everything issued to it before. The emulator runs each operation when it is
// issued, which is one order CUDA allows; exceptions from `work` (a KernelFault) propagate to
// the caller.
void run_on_stream(void* stream, const std::function<void()>& work);

// Records a launch configuration error (a cudaError_t value, e.g. cudaErrorInvalidConfiguration
// = 9, cudaErrorInvalidValue = 1) for the next cudaGetLastError / cudaPeekAtLastError, as a
// failed <<<...>>> launch does on a device.
void set_launch_error(int cuda_error, const std::string& what);

// The dynamic shared memory a launch of `kernel` may use: the device's default per-block limit
// (48 KiB), or what cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// n) allowed, up to the device's opt-in maximum.
size_t dynamic_shared_limit(const void* kernel);

// The emulated device model's limits the launcher checks.
struct LaunchLimits {
  unsigned max_threads_per_block = 1024;
  unsigned max_block_dim[3] = {1024, 1024, 64};
  unsigned max_grid_dim[3] = {2147483647u, 65535, 65535};
  size_t static_shared_per_block = 48 * 1024;  // static __shared__ arrays, summed
};
const LaunchLimits& launch_limits();

}  // namespace braid::simt
