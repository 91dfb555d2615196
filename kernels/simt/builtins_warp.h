// Kernel-side warp intrinsics: __shfl*_sync (with width), the votes, __match*_sync,
// __reduce*_sync, __syncwarp and __activemask, over the emulator's warp exchange (warp.h).
#pragma once

#include <cstddef>
#include <source_location>
#include <type_traits>

namespace braid::simt {

enum class ShuffleMode { idx, up, down, bfly };
enum class ReduceOp { add, min, max, bit_and, bit_or, bit_xor };

// PTX shfl.sync for a value of `bytes` (<= 16): the lanes of `mask` exchange, then each returns
// the value of the lane its mode, `lane_arg` and `width` select (its own where that is outside
// its segment). A width that is not a power of 2 in [1, 32], or a source lane outside `mask`,
// is a fault.
void shuffle_bytes(unsigned mask, const void* value, void* result, size_t bytes, ShuffleMode mode,
                   unsigned lane_arg, int width, const char* op, const std::source_location& site);
// The lanes of `mask` whose predicate is non-zero.
unsigned vote_ballot(unsigned mask, int predicate, const char* op,
                     const std::source_location& site);
// The lanes of `mask` holding the same `bytes` (<= 8) as the caller; *all_equal: all of them.
unsigned match_any(unsigned mask, const void* value, size_t bytes, const char* op,
                   const std::source_location& site, bool* all_equal);
long long reduce_sync(unsigned mask, long long value, ReduceOp reduce, const char* op,
                      const std::source_location& site);
void syncwarp(unsigned mask, const std::source_location& site);
unsigned active_mask();

template <class T>
T shuffle(unsigned mask, const T& value, ShuffleMode mode, int lane_arg, int width, const char* op,
          const std::source_location& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16,
                "shuffles move values of up to 16 bytes");
  T out;
  shuffle_bytes(mask, &value, &out, sizeof(T), mode, static_cast<unsigned>(lane_arg), width, op,
                site);
  return out;
}

}  // namespace braid::simt

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
              std::source_location site = std::source_location::current()) {
  return braid::simt::shuffle(mask, var, braid::simt::ShuffleMode::idx, src_lane, width,
                              "__shfl_sync", site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                 std::source_location site = std::source_location::current()) {
  return braid::simt::shuffle(mask, var, braid::simt::ShuffleMode::up, static_cast<int>(delta),
                              width, "__shfl_up_sync", site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   std::source_location site = std::source_location::current()) {
  return braid::simt::shuffle(mask, var, braid::simt::ShuffleMode::down, static_cast<int>(delta),
                              width, "__shfl_down_sync", site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                  std::source_location site = std::source_location::current()) {
  return braid::simt::shuffle(mask, var, braid::simt::ShuffleMode::bfly, lane_mask, width,
                              "__shfl_xor_sync", site);
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return braid::simt::vote_ballot(mask, predicate, "__ballot_sync", site);
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return braid::simt::vote_ballot(mask, predicate, "__any_sync", site) != 0;
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return braid::simt::vote_ballot(mask, predicate, "__all_sync", site) == mask;
}
inline int __uni_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  const unsigned ballot = braid::simt::vote_ballot(mask, predicate, "__uni_sync", site);
  return ballot == 0 || ballot == mask;
}

template <class T>
unsigned __match_any_sync(unsigned mask, T value,
                          std::source_location site = std::source_location::current()) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_any_sync takes 32- or 64-bit values");
  return braid::simt::match_any(mask, &value, sizeof(T), "__match_any_sync", site, nullptr);
}
template <class T>
unsigned __match_all_sync(unsigned mask, T value, int* pred,
                          std::source_location site = std::source_location::current()) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_all_sync takes 32- or 64-bit values");
  bool all = false;
  braid::simt::match_any(mask, &value, sizeof(T), "__match_all_sync", site, &all);
  *pred = all ? 1 : 0;
  return all ? mask : 0u;
}

#define BRAID_SIMT_REDUCE(name, T, op)                                                       \
  inline T name(unsigned mask, T value,                                                      \
                std::source_location site = std::source_location::current()) {               \
    return static_cast<T>(braid::simt::reduce_sync(mask, static_cast<long long>(value),      \
                                                   braid::simt::ReduceOp::op, #name, site)); \
  }
BRAID_SIMT_REDUCE(__reduce_add_sync, unsigned, add)
BRAID_SIMT_REDUCE(__reduce_add_sync, int, add)
BRAID_SIMT_REDUCE(__reduce_min_sync, unsigned, min)
BRAID_SIMT_REDUCE(__reduce_min_sync, int, min)
BRAID_SIMT_REDUCE(__reduce_max_sync, unsigned, max)
BRAID_SIMT_REDUCE(__reduce_max_sync, int, max)
BRAID_SIMT_REDUCE(__reduce_and_sync, unsigned, bit_and)
BRAID_SIMT_REDUCE(__reduce_or_sync, unsigned, bit_or)
BRAID_SIMT_REDUCE(__reduce_xor_sync, unsigned, bit_xor)
#undef BRAID_SIMT_REDUCE

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  braid::simt::syncwarp(mask, site);
}
inline unsigned __activemask() {
  return braid::simt::active_mask();
}
