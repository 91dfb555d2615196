// The emulated cuBLAS handle, shared by the handle calls (cublas.cpp) and the GEMM
// (cublas_gemm.cpp). Internal to kernels/simt/runtime.
#pragma once

#include <cublas_v2.h>

namespace braid::simt::cublas {

struct cublasContext {
  int device = 0;  // current when the handle was created: its work runs there
  cudaStream_t stream = nullptr;
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

// Copies the state of a live handle; false when `handle` is not one (never created, destroyed).
bool find_handle(cublasHandle_t handle, cublasContext* out);

}  // namespace braid::simt::cublas
