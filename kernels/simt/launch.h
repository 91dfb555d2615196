// Kernel launches in the emulator: what the translator turns `kernel<<<grid, block, smem,
// stream>>>(args)` into, and the seed that orders the emulated threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "include/vector_types.h"

namespace braid::simt {

// Runs the kernel once for the calling emulated thread, with its (copied) arguments.
using KernelInvoker = void (*)(const void* call);

struct LaunchConfig {
  const void* kernel = nullptr;  // identifies the kernel to the runtime (cudaFuncSetAttribute)
  const char* name = "";
  dim3 grid, block;
  size_t dynamic_smem = 0;
  void* stream = nullptr;  // a cudaStream_t; null: the legacy default stream
};

// Checks `config` against the device model: a bad one records the launch error (what a failed
// <<<>>> does; cudaGetLastError reports it) and runs nothing. Otherwise runs the whole grid in
// the stream's order, blocks in a seeded random order, every thread calling invoke(call).
// Throws KernelFault (fault.h) when a thread breaks CUDA's rules; the launch is then abandoned.
void launch_kernel(const LaunchConfig& config, KernelInvoker invoke, const void* call);

// `launch(kernel, "kernel", grid, block, smem, stream)(args...)`: the arguments are converted to
// the kernel's parameter types as a call converts them, copied once, and every emulated thread
// receives its own copy (kernel parameters are per-thread values).
template <class... P>
class Launcher {
 public:
  Launcher(void (*kernel)(P...), const LaunchConfig& config) : kernel_(kernel), config_(config) {}

  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P),
                  "kernel launched with the wrong number of arguments");
    const Call call{kernel_, std::tuple<std::decay_t<P>...>(convert<P>(std::forward<A>(args))...)};
    launch_kernel(config_, &invoke, &call);
  }

 private:
  struct Call {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> params;
  };
  // Copy-initialisation: the implicit conversions of a call, no explicit ones.
  template <class T, class A>
  static std::decay_t<T> convert(A&& a) {
    return std::forward<A>(a);
  }
  static void invoke(const void* call) {
    const Call& c = *static_cast<const Call*>(call);
    std::apply(c.kernel, c.params);
  }

  void (*kernel_)(P...);
  LaunchConfig config_;
};

template <class... P>
Launcher<P...> launch(void (*kernel)(P...), const char* name, dim3 grid, dim3 block,
                      size_t dynamic_smem = 0, void* stream = nullptr) {
  return Launcher<P...>(kernel, LaunchConfig{reinterpret_cast<const void*>(kernel), name, grid,
                                             block, dynamic_smem, stream});
}

// The seed of the emulated thread and block order: BRAID_SIMT_SEED (default 1) at start-up.
// Every launch draws its own order from the seed and the number of launches before it, so a run
// repeats exactly and another seed reorders everything. set_seed restarts that count.
void set_seed(uint64_t seed);
uint64_t seed();

}  // namespace braid::simt
