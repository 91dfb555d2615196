// The emulator's stand-in for cuBLAS's cublas_v2.h: handles, cuBLAS's status codes and enums
// (same values), and the calls braid makes. The GEMM is a float64 reference that checks its
// arguments as cuBLAS documents and its memory accesses as a kernel's are checked
// (kernels/simt/runtime/cublas_gemm.cpp).
//
// Scalars are always read from host memory (CUBLAS_POINTER_MODE_HOST, the default;
// cublasSetPointerMode is absent), and the math mode is accepted but changes nothing: results are
// float64 sums rounded once to float, more exact than any mode of the library. Types live in
// braid::simt::cublas and the functions have C++ linkage, as in cuda_runtime_api.h.
#pragma once

#include "cuda_runtime_api.h"

namespace braid::simt::cublas {

enum cublasStatus_t : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};

enum cublasOperation_t : int {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3,  // not valid for gemm
};

enum cublasMath_t : int {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,  // deprecated in cuBLAS 11
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,  // a flag, or-ed into a mode
};

struct cublasContext;
using cublasHandle_t = cublasContext*;

}  // namespace braid::simt::cublas

using braid::simt::cublas::cublasHandle_t;
using braid::simt::cublas::cublasMath_t;
using braid::simt::cublas::cublasOperation_t;
using braid::simt::cublas::cublasStatus_t;
using enum braid::simt::cublas::cublasStatus_t;
using enum braid::simt::cublas::cublasOperation_t;
using enum braid::simt::cublas::cublasMath_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* streamId);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

// C = alpha * op(A) * op(B) + beta * C for each of batchCount matrices, column-major; A, B and C
// of batch i start strideA, strideB and strideC elements after those of batch i - 1.
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount);
