// The entry points -fsanitize=thread instrumentation calls (kernel objects are compiled with it
// but linked without libtsan): every load, store and atomic of kernel code lands here and goes to
// the checker. This file must not itself be compiled with -fsanitize=thread.
#include <cstdint>
#include <mutex>

#include "builtins_memory.h"
#include "checker.h"

using braid::simt::Access;
using braid::simt::check_access;

namespace {

// Atomics the instrumented code performs (std::atomic, __atomic builtins) run here, as their
// instrumentation asks; inside an emulated thread they are checked as atomic accesses and yield,
// so spin loops on them make progress.
void atomic_access(const volatile void* address, size_t bytes, Access access, uintptr_t pc) {
  check_access(const_cast<const void*>(address), bytes, access, pc, true);
}

void after_atomic() {
  braid::simt::yield_thread();
}

std::mutex& wide_atomics() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

#define BRAID_SIMT_PC BRAID_SIMT_CALLER_PC()

#define BRAID_SIMT_ACCESS_HOOKS(n)                                 \
  extern "C" void __tsan_read##n(void* a) {                        \
    check_access(a, n, braid::simt::kRead, BRAID_SIMT_PC, true);   \
  }                                                                \
  extern "C" void __tsan_write##n(void* a) {                       \
    check_access(a, n, braid::simt::kWrite, BRAID_SIMT_PC, true);  \
  }                                                                \
  extern "C" void __tsan_volatile_read##n(void* a) {               \
    check_access(a, n, braid::simt::kRead, BRAID_SIMT_PC, true);   \
  }                                                                \
  extern "C" void __tsan_volatile_write##n(void* a) {              \
    check_access(a, n, braid::simt::kWrite, BRAID_SIMT_PC, true);  \
  }                                                                \
  extern "C" void __tsan_unaligned_read##n(void* a) {              \
    check_access(a, n, braid::simt::kRead, BRAID_SIMT_PC, false);  \
  }                                                                \
  extern "C" void __tsan_unaligned_write##n(void* a) {             \
    check_access(a, n, braid::simt::kWrite, BRAID_SIMT_PC, false); \
  }                                                                \
  extern "C" void __tsan_unaligned_volatile_read##n(void* a) {     \
    check_access(a, n, braid::simt::kRead, BRAID_SIMT_PC, false);  \
  }                                                                \
  extern "C" void __tsan_unaligned_volatile_write##n(void* a) {    \
    check_access(a, n, braid::simt::kWrite, BRAID_SIMT_PC, false); \
  }

BRAID_SIMT_ACCESS_HOOKS(1)
BRAID_SIMT_ACCESS_HOOKS(2)
BRAID_SIMT_ACCESS_HOOKS(4)
BRAID_SIMT_ACCESS_HOOKS(8)
BRAID_SIMT_ACCESS_HOOKS(16)

extern "C" {

void __tsan_read_range(void* a, unsigned long size) {
  check_access(a, size, braid::simt::kRead, BRAID_SIMT_PC, false);
}
void __tsan_write_range(void* a, unsigned long size) {
  check_access(a, size, braid::simt::kWrite, BRAID_SIMT_PC, false);
}

// Nothing to set up; function entry/exit is not instrumented (and ignored if it is).
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
// Virtual-table pointer updates and reads (objects with virtual functions): not device memory.
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

void __tsan_atomic_thread_fence(int) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
void __tsan_atomic_signal_fence(int) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

}  // extern "C"

// The instrumented atomics by width; every one is performed sequentially consistent, which is at
// least as strong as any order the code asked for.
#define BRAID_SIMT_ATOMIC_HOOKS(bits, T)                                                           \
  extern "C" T __tsan_atomic##bits##_load(const volatile T* a, int) {                              \
    atomic_access(a, sizeof(T), braid::simt::kAtomicLoad, BRAID_SIMT_PC);                          \
    const T v = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                              \
    after_atomic();                                                                                \
    return v;                                                                                      \
  }                                                                                                \
  extern "C" void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                           \
    atomic_access(a, sizeof(T), braid::simt::kAtomicStore, BRAID_SIMT_PC);                         \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                      \
    after_atomic();                                                                                \
  }                                                                                                \
  BRAID_SIMT_ATOMIC_RMW(bits, T, exchange, __atomic_exchange_n)                                    \
  BRAID_SIMT_ATOMIC_RMW(bits, T, fetch_add, __atomic_fetch_add)                                    \
  BRAID_SIMT_ATOMIC_RMW(bits, T, fetch_sub, __atomic_fetch_sub)                                    \
  BRAID_SIMT_ATOMIC_RMW(bits, T, fetch_and, __atomic_fetch_and)                                    \
  BRAID_SIMT_ATOMIC_RMW(bits, T, fetch_or, __atomic_fetch_or)                                      \
  BRAID_SIMT_ATOMIC_RMW(bits, T, fetch_xor, __atomic_fetch_xor)                                    \
  BRAID_SIMT_ATOMIC_RMW(bits, T, fetch_nand, __atomic_fetch_nand)                                  \
  extern "C" int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int,      \
                                                               int) {                              \
    atomic_access(a, sizeof(T), braid::simt::kAtomicUpdate, BRAID_SIMT_PC);                        \
    const bool ok =                                                                                \
        __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
    after_atomic();                                                                                \
    return ok;                                                                                     \
  }                                                                                                \
  extern "C" int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) { \
    atomic_access(a, sizeof(T), braid::simt::kAtomicUpdate, BRAID_SIMT_PC);                        \
    const bool ok =                                                                                \
        __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
    after_atomic();                                                                                \
    return ok;                                                                                     \
  }                                                                                                \
  extern "C" T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {     \
    atomic_access(a, sizeof(T), braid::simt::kAtomicUpdate, BRAID_SIMT_PC);                        \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
    after_atomic();                                                                                \
    return c;                                                                                      \
  }

#define BRAID_SIMT_ATOMIC_RMW(bits, T, name, builtin)                       \
  extern "C" T __tsan_atomic##bits##_##name(volatile T* a, T v, int) {      \
    atomic_access(a, sizeof(T), braid::simt::kAtomicUpdate, BRAID_SIMT_PC); \
    const T old = builtin(a, v, __ATOMIC_SEQ_CST);                          \
    after_atomic();                                                         \
    return old;                                                             \
  }

BRAID_SIMT_ATOMIC_HOOKS(8, int8_t)
BRAID_SIMT_ATOMIC_HOOKS(16, int16_t)
BRAID_SIMT_ATOMIC_HOOKS(32, int32_t)
BRAID_SIMT_ATOMIC_HOOKS(64, int64_t)

// 128-bit atomics would need libatomic or cmpxchg16b; a lock is correct and they are rare.
using Int128 = __int128;

namespace {

template <class F>
auto wide(const volatile Int128* a, Access access, uintptr_t pc, F operation) {
  atomic_access(a, 16, access, pc);
  std::lock_guard<std::mutex> lock(wide_atomics());
  return operation(const_cast<Int128*>(a));
}

}  // namespace

extern "C" {
Int128 __tsan_atomic128_load(const volatile Int128* a, int) {
  return wide(a, braid::simt::kAtomicLoad, BRAID_SIMT_PC, [](Int128* p) { return *p; });
}
void __tsan_atomic128_store(volatile Int128* a, Int128 v, int) {
  wide(a, braid::simt::kAtomicStore, BRAID_SIMT_PC, [v](Int128* p) { return *p = v; });
}
Int128 __tsan_atomic128_exchange(volatile Int128* a, Int128 v, int) {
  return wide(a, braid::simt::kAtomicUpdate, BRAID_SIMT_PC, [v](Int128* p) {
    const Int128 old = *p;
    *p = v;
    return old;
  });
}
#define BRAID_SIMT_WIDE_RMW(name, expression)                                  \
  Int128 __tsan_atomic128_##name(volatile Int128* a, Int128 v, int) {          \
    return wide(a, braid::simt::kAtomicUpdate, BRAID_SIMT_PC, [v](Int128* p) { \
      const Int128 old = *p;                                                   \
      *p = expression;                                                         \
      return old;                                                              \
    });                                                                        \
  }
BRAID_SIMT_WIDE_RMW(fetch_add, old + v)
BRAID_SIMT_WIDE_RMW(fetch_sub, old - v)
BRAID_SIMT_WIDE_RMW(fetch_and, old& v)
BRAID_SIMT_WIDE_RMW(fetch_or, old | v)
BRAID_SIMT_WIDE_RMW(fetch_xor, old ^ v)
BRAID_SIMT_WIDE_RMW(fetch_nand, ~(old& v))
int __tsan_atomic128_compare_exchange_strong(volatile Int128* a, Int128* c, Int128 v, int, int) {
  return wide(a, braid::simt::kAtomicUpdate, BRAID_SIMT_PC, [c, v](Int128* p) {
    if (*p == *c) {
      *p = v;
      return 1;
    }
    *c = *p;
    return 0;
  });
}
int __tsan_atomic128_compare_exchange_weak(volatile Int128* a, Int128* c, Int128 v, int m, int f) {
  return __tsan_atomic128_compare_exchange_strong(a, c, v, m, f);
}
Int128 __tsan_atomic128_compare_exchange_val(volatile Int128* a, Int128 c, Int128 v, int m, int f) {
  __tsan_atomic128_compare_exchange_strong(a, &c, v, m, f);
  return c;
}
}  // extern "C"
