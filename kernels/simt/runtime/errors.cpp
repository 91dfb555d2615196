// The emulated runtime's errors: names and strings, the per-thread last error, the sticky error,
// and launch errors reported by the launcher (runtime_hooks.h).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "runtime_state.h"
#include "simt/emulated_device.h"
#include "simt/runtime_hooks.h"

namespace braid::simt {
namespace {

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_launch_detail;
std::atomic<int> g_sticky{cudaSuccess};

// The errors after which CUDA's context is unusable (the device faulted while running a kernel):
// every later call returns them, and the process must restart. Configuration errors of a
// launch (bad grid, too much shared memory) are ordinary errors that cudaGetLastError clears.
bool is_sticky(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace rt {

cudaError_t record(cudaError_t error) {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}

cudaError_t sticky_error() {
  return static_cast<cudaError_t>(g_sticky.load());
}

}  // namespace rt

void set_launch_error(int cuda_error, const std::string& what) {
  const auto error = static_cast<cudaError_t>(cuda_error);
  t_launch_detail = what;
  // The emulator's one line of its own: CUDA's error code alone does not say which limit broke.
  std::fprintf(stderr, "simt: launch failed with %s: %s\n", cudaGetErrorName(error), what.c_str());
  if (is_sticky(error)) {
    int none = cudaSuccess;
    g_sticky.compare_exchange_strong(none, error);  // the first fault is the one reported
  }
  rt::record(error);
}

void reset_runtime_errors() {
  g_sticky.store(cudaSuccess);
  t_last_error = cudaSuccess;
  t_launch_detail.clear();
}

std::string last_launch_error_detail() {
  return t_launch_detail;
}

}  // namespace braid::simt

cudaError_t cudaGetLastError() {
  if (const cudaError_t sticky = braid::simt::rt::sticky_error()) return sticky;
  const cudaError_t error = braid::simt::t_last_error;
  braid::simt::t_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  if (const cudaError_t sticky = braid::simt::rt::sticky_error()) return sticky;
  return braid::simt::t_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define BRAID_SIMT_CUDA_ERROR(name, value, text) \
  case name:                                     \
    return #name;
#include "braid_simt_cuda_errors.inc"
#undef BRAID_SIMT_CUDA_ERROR
  }
  return "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
#define BRAID_SIMT_CUDA_ERROR(name, value, text) \
  case name:                                     \
    return text;
#include "braid_simt_cuda_errors.inc"
#undef BRAID_SIMT_CUDA_ERROR
  }
  return "unrecognized error code";
}
