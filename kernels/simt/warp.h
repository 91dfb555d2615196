// Warp-collective exchange for the emulated intrinsics (shuffles, votes, mma.sync, ldmatrix):
// the lanes a mask names meet at one call and each sees every participant's value.
//
// INTERFACE between the emulator's parts: implemented by the scheduler (warp.cpp), used by the
// built-ins (builtins.h) and by the emulated bodies of kernels/device_intrinsics.cuh.
#pragma once

#include <array>
#include <cstring>
#include <source_location>
#include <type_traits>

namespace braid::simt {

// The calling emulated thread's lane (linear thread index % 32) and warp (linear index / 32).
int lane_id();
int warp_id();

// Low-level form: every lane of `mask` in the calling thread's warp calls it with the same
// `mask`, `op` and `site`, each contributing `bytes` bytes at `value`; when all have arrived,
// every participant gets all 32 lanes' bytes in `out` (32 * bytes; lanes outside the mask are
// zero). A lane of the mask that exited, waits at another call or site, or passed a different
// mask, and a caller missing from its own mask, are reported as faults naming the kernel, block,
// warp, lanes and both call sites. Blocks the calling fiber until the exchange completes.
void warp_exchange(unsigned mask, const void* value, size_t bytes, void* out, const char* op,
                   const std::source_location& site);

// Typed form: returns every lane's value (T{} for lanes outside the mask).
template <class T>
std::array<T, 32> warp_gather(unsigned mask, const T& value, const char* op,
                              const std::source_location& site = std::source_location::current()) {
  static_assert(std::is_trivially_copyable_v<T>, "warp_gather moves values as bytes");
  std::array<T, 32> out{};
  warp_exchange(mask, &value, sizeof(T), out.data(), op, site);
  return out;
}

}  // namespace braid::simt
