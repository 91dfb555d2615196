// The emulator's stand-in for CUDA's driver_types.h: error codes, copy kinds, stream and event
// handles and flags, function attributes and cudaDeviceProp, with CUDA's names and values.
//
// The types live in braid::simt::cudart and are brought into the global namespace by
// using-declarations, and the API (cuda_runtime_api.h) has C++ linkage: a binary that also links
// the real runtime (nvcc-compiled host tests of a CUDA build) sees no clashing symbols. Every
// enum has int as its underlying type, so an out-of-range value (a bad argument the runtime must
// reject) is still a value of the type rather than undefined behaviour.
#pragma once

#include <cstddef>

namespace braid::simt::cudart {

enum cudaError : int {
#define BRAID_SIMT_CUDA_ERROR(name, value, text) name = value,
#include "braid_simt_cuda_errors.inc"
#undef BRAID_SIMT_CUDA_ERROR
};
using cudaError_t = cudaError;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,  // direction from the pointers (unified addressing)
};

enum cudaFuncAttribute : int {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

// Opaque handles; the runtime validates every one it is given before using it.
struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

// The properties the emulated models define (field names and meanings as in CUDA's struct; the
// fields CUDA 13 removed, such as clockRate and memoryClockRate, are absent there and here).
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  int multiProcessorCount;
  int integrated;
  int canMapHostMemory;
  int concurrentKernels;
  int ECCEnabled;
  int unifiedAddressing;
  int memoryBusWidth;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  int regsPerMultiprocessor;
  int managedMemory;
  size_t sharedMemPerMultiprocessor;
  size_t sharedMemPerBlockOptin;
  size_t reservedSharedMemPerBlock;
  int maxBlocksPerMultiProcessor;
  int cooperativeLaunch;
  int memoryPoolsSupported;
};

}  // namespace braid::simt::cudart

using braid::simt::cudart::cudaDeviceProp;
using braid::simt::cudart::cudaError;
using braid::simt::cudart::cudaError_t;
using braid::simt::cudart::cudaEvent_t;
using braid::simt::cudart::cudaFuncAttribute;
using braid::simt::cudart::cudaMemcpyKind;
using braid::simt::cudart::cudaStream_t;
using enum braid::simt::cudart::cudaError;
using enum braid::simt::cudart::cudaMemcpyKind;
using enum braid::simt::cudart::cudaFuncAttribute;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
// The special streams: the legacy default stream (also nullptr) and the per-thread one.
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04

#define cudaEventWaitDefault 0x00
#define cudaEventWaitExternal 0x01
