// The emulated cuBLAS library's handles and status texts: everything but the GEMM.
#include <cublas_v2.h>

#include <mutex>
#include <set>

#include "cublas_handle.h"
#include "runtime_state.h"

namespace braid::simt::cublas {
namespace {

std::mutex g_mutex;
// The live handles; every call checks its handle here first. Never destroyed: a handle kept for
// the process (braid keeps one per device) stays reachable at exit, as with the real library,
// instead of being reported as a leak once this set's destructor ran.
std::set<cublasContext*>& g_handles = *new std::set<cublasContext*>;

// Runs `change` on a live handle under the lock.
template <class Change>
cublasStatus_t with_handle(cublasHandle_t handle, Change change) {
  std::lock_guard lock(g_mutex);
  if (handle == nullptr || g_handles.count(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  return change(*handle);
}

}  // namespace

bool find_handle(cublasHandle_t handle, cublasContext* out) {
  return with_handle(handle, [&](cublasContext& h) {
           *out = h;
           return CUBLAS_STATUS_SUCCESS;
         }) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace braid::simt::cublas

namespace cb = braid::simt::cublas;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // The library initialises the runtime; a device left unusable by a fault cannot be used.
  if (braid::simt::rt::sticky_error() != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* created = new cb::cublasContext;
  created->device = braid::simt::rt::current_device();
  std::lock_guard lock(cb::g_mutex);
  cb::g_handles.insert(created);
  *handle = created;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  std::lock_guard lock(cb::g_mutex);
  if (handle == nullptr || cb::g_handles.erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId) {
  // The stream is not checked here (nor by cuBLAS): a dead one fails the next call's launch.
  return cb::with_handle(handle, [&](cb::cublasContext& h) {
    h.stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
  });
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* streamId) {
  return cb::with_handle(handle, [&](cb::cublasContext& h) {
    if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = h.stream;
    return CUBLAS_STATUS_SUCCESS;
  });
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return cb::with_handle(handle, [&](cb::cublasContext& h) {
    // One of the four modes, optionally with the flag that forbids reduced-precision reductions.
    const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base < CUBLAS_DEFAULT_MATH || base > CUBLAS_TF32_TENSOR_OP_MATH)
      return CUBLAS_STATUS_INVALID_VALUE;
    h.mode = mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  return cb::with_handle(handle, [&](cb::cublasContext& h) {
    if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h.mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "an error was detected when checking the current licensing";
  }
  return "unknown error";
}
