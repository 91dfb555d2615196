// BRAID_CUDA_CHECK and BRAID_CUBLAS_CHECK: CUDA runtime and cuBLAS status codes as braid::Error.
//
// Both sit on the library's one generic status check (BRAID_CHECK_STATUS), so a failing call
// reads like every other braid error: the expression, the status name and its explanation.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "braid/core/error.h"

namespace braid::cuda {

// "cudaErrorMemoryAllocation (out of memory)": the name is what one searches the docs for.
inline std::string describe_status(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorName(status), cudaGetErrorString(status));
}

inline std::string describe_status(cublasStatus_t status) {
  return fmt::format("{} ({})", cublasGetStatusName(status), cublasGetStatusString(status));
}

}  // namespace braid::cuda

#define BRAID_CUDA_CHECK(expr) BRAID_CHECK_STATUS(expr, cudaSuccess, ::braid::cuda::describe_status)

#define BRAID_CUBLAS_CHECK(expr) \
  BRAID_CHECK_STATUS(expr, CUBLAS_STATUS_SUCCESS, ::braid::cuda::describe_status)

// Right after a <<<...>>> launch: a bad configuration (too many threads, too much shared
// memory) is reported here, at the launch that caused it, rather than at some later call.
#define BRAID_CUDA_CHECK_LAUNCH() BRAID_CUDA_CHECK(cudaGetLastError())
