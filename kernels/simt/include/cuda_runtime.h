// The emulator's stand-in for CUDA's cuda_runtime.h, which nvcc puts in front of every .cu file:
// the runtime API, its C++ conveniences, and the device built-ins (threadIdx, __syncthreads, ...).
#pragma once

#include "cuda_runtime_api.h"
#include "simt/builtins.h"

// As CUDA's: lets a kernel be passed as itself. The key is the kernel's address as a
// `const void*`, which is what the launcher must pass to braid::simt::dynamic_shared_limit.
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
