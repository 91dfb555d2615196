// Force-included (-include) into every SIMT-translated kernel source: CUDA's execution-space
// keywords, the per-thread built-in variables, barriers, warp intrinsics, atomics, memory and
// math intrinsics, all served by the emulator (braid_simt_core). Plain host C++ otherwise.
#pragma once

#define BRAID_SIMT 1

#include <source_location>

#include "builtins_atomic.h"
#include "builtins_math.h"
#include "builtins_memory.h"
#include "builtins_warp.h"
#include "include/vector_functions.h"
#include "include/vector_types.h"
#include "launch.h"

// Execution spaces and qualifiers: every function is a host function here. __shared__ is left
// undefined on purpose: the translator rewrites every declaration, and one it missed (inside a
// macro, say) must not compile.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
// __noinline__ is not a macro here: libstdc++ writes __attribute__((__noinline__)), which a macro
// would break; the translator rewrites the CUDA keyword instead.
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __maxnreg__(n)

// The built-in variables, per emulated thread: the scheduler sets them at every switch.
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
inline constexpr int warpSize = 32;

// Block barriers. Every thread of the block must reach the same one; the emulator reports a
// thread that exited instead, and threads waiting at different call sites.
void __syncthreads(std::source_location site = std::source_location::current());
int __syncthreads_count(int predicate, std::source_location site = std::source_location::current());
int __syncthreads_and(int predicate, std::source_location site = std::source_location::current());
int __syncthreads_or(int predicate, std::source_location site = std::source_location::current());
