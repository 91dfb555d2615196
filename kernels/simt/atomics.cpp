// The atomic built-ins (builtins_atomic.h): checked as atomic read-modify-writes of shared or
// device memory, performed with the host's atomics, then the thread yields.
#include <atomic>
#include <cstdint>
#include <cstring>

#include "builtins_atomic.h"
#include "builtins_memory.h"
#include "checker.h"

namespace braid::simt {
namespace {

// Applies new = update(old) atomically (a compare-and-swap loop over the bits), returns old.
// atomicExch is checked as a store: code uses it to publish a value and may ignore the old one,
// so exchanging into never-written memory is no uninitialised read.
template <class T, class Update>
T atomic_update(T* address, uintptr_t pc, Update update, Access access = kAtomicUpdate) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  check_access(address, sizeof(T), access, pc, true);
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (!ref.compare_exchange_weak(old, update(old))) {
  }
  yield_thread();
  return old;
}

}  // namespace
}  // namespace braid::simt

using braid::simt::atomic_update;

#define BRAID_SIMT_ATOMIC(T, name, expression)                      \
  T name(T* address, T val) {                                       \
    return atomic_update(address, BRAID_SIMT_CALLER_PC(),           \
                         [val](T old) -> T { return expression; }); \
  }

BRAID_SIMT_ATOMIC(int, atomicAdd, static_cast<int>(static_cast<unsigned>(old) + val))
BRAID_SIMT_ATOMIC(unsigned, atomicAdd, old + val)
BRAID_SIMT_ATOMIC(unsigned long long, atomicAdd, old + val)
BRAID_SIMT_ATOMIC(float, atomicAdd, old + val)
BRAID_SIMT_ATOMIC(double, atomicAdd, old + val)

BRAID_SIMT_ATOMIC(int, atomicSub, static_cast<int>(static_cast<unsigned>(old) - val))
BRAID_SIMT_ATOMIC(unsigned, atomicSub, old - val)

BRAID_SIMT_ATOMIC(int, atomicMin, val < old ? val : old)
BRAID_SIMT_ATOMIC(unsigned, atomicMin, val < old ? val : old)
BRAID_SIMT_ATOMIC(long long, atomicMin, val < old ? val : old)
BRAID_SIMT_ATOMIC(unsigned long long, atomicMin, val < old ? val : old)
BRAID_SIMT_ATOMIC(int, atomicMax, val > old ? val : old)
BRAID_SIMT_ATOMIC(unsigned, atomicMax, val > old ? val : old)
BRAID_SIMT_ATOMIC(long long, atomicMax, val > old ? val : old)
BRAID_SIMT_ATOMIC(unsigned long long, atomicMax, val > old ? val : old)

BRAID_SIMT_ATOMIC(unsigned, atomicInc, old >= val ? 0u : old + 1u)
BRAID_SIMT_ATOMIC(unsigned, atomicDec, (old == 0u || old > val) ? val : old - 1u)

BRAID_SIMT_ATOMIC(int, atomicAnd, old& val)
BRAID_SIMT_ATOMIC(unsigned, atomicAnd, old& val)
BRAID_SIMT_ATOMIC(unsigned long long, atomicAnd, old& val)
BRAID_SIMT_ATOMIC(int, atomicOr, old | val)
BRAID_SIMT_ATOMIC(unsigned, atomicOr, old | val)
BRAID_SIMT_ATOMIC(unsigned long long, atomicOr, old | val)
BRAID_SIMT_ATOMIC(int, atomicXor, old ^ val)
BRAID_SIMT_ATOMIC(unsigned, atomicXor, old ^ val)
BRAID_SIMT_ATOMIC(unsigned long long, atomicXor, old ^ val)

#undef BRAID_SIMT_ATOMIC

#define BRAID_SIMT_EXCH(T)                                              \
  T atomicExch(T* address, T val) {                                     \
    return atomic_update(                                               \
        address, BRAID_SIMT_CALLER_PC(), [val](T) -> T { return val; }, \
        braid::simt::kAtomicStore);                                     \
  }
BRAID_SIMT_EXCH(int)
BRAID_SIMT_EXCH(unsigned)
BRAID_SIMT_EXCH(unsigned long long)
BRAID_SIMT_EXCH(float)
#undef BRAID_SIMT_EXCH

#define BRAID_SIMT_CAS(T)                                                                    \
  T atomicCAS(T* address, T compare, T val) {                                                \
    return atomic_update(address, BRAID_SIMT_CALLER_PC(),                                    \
                         [compare, val](T old) -> T { return old == compare ? val : old; }); \
  }
BRAID_SIMT_CAS(int)
BRAID_SIMT_CAS(unsigned)
BRAID_SIMT_CAS(unsigned long long)
BRAID_SIMT_CAS(unsigned short)
#undef BRAID_SIMT_CAS
