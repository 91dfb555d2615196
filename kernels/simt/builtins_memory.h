// Kernel-side memory built-ins: the targets of the translated __shared__ declarations, __ldg and
// the cache-hinted loads and stores, memory fences, and the odd control intrinsics.
#pragma once

#include <cstddef>
#include <type_traits>

namespace braid::simt {

// Identifies one static __shared__ declaration (per template instance: the translator puts a
// function-local static of this type next to each).
struct SharedSlot {};

// The block's storage for a declaration: laid out and poisoned on its first use in the block.
void* shared_static(SharedSlot& slot, size_t bytes, size_t align, const char* name,
                    const char* type);
// The block's dynamic shared memory (the launch's third <<<>>> argument).
void* shared_dynamic(const char* name);

// `__shared__ T name[N][M];` becomes `auto& name = static_shared<T[N][M], A>(slot, ...)`: a
// reference to the array in this block's shared memory, so sizeof and indexing work unchanged.
template <class T, size_t Align = 0>
T& static_shared(SharedSlot& slot, const char* name, const char* type) {
  constexpr size_t natural = alignof(std::remove_all_extents_t<T>);
  constexpr size_t align = Align > natural ? Align : natural;
  return *static_cast<T*>(shared_static(slot, sizeof(T), align, name, type));
}

// `extern __shared__ T name[];` becomes `T* const name = dynamic_shared<T>("name")`.
template <class T>
T* dynamic_shared(const char* name) {
  return static_cast<T*>(shared_dynamic(name));
}

// A yield point for the scheduler (__nanosleep, atomics): lets spin-waiting kernels progress.
void yield_thread();
[[noreturn]] void trap(const char* what);
long long clock_ticks();

}  // namespace braid::simt

// Loads through the read-only / cache-hinted paths are plain loads here (instrumented like any).
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
template <class T>
inline T __ldca(const T* p) {
  return *p;
}
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
template <class T>
inline T __ldcs(const T* p) {
  return *p;
}
template <class T>
inline T __ldlu(const T* p) {
  return *p;
}
template <class T>
inline T __ldcv(const T* p) {
  return *p;
}
template <class T>
inline void __stwb(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stcg(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stcs(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stwt(T* p, T v) {
  *p = v;
}

// Fences order this thread's accesses for others; the emulator runs one thread at a time, so
// they only have to exist. (Inter-block ordering through fences is not modelled: global_shadow.)
void __threadfence();
void __threadfence_block();
void __threadfence_system();

inline void __nanosleep(unsigned) {
  braid::simt::yield_thread();
}
[[noreturn]] inline void __trap() {
  braid::simt::trap("__trap()");
}
[[noreturn]] inline void __brkpt() {
  braid::simt::trap("__brkpt()");
}
inline long long clock64() {
  return braid::simt::clock_ticks();
}
