// Fibers for the emulated threads: contexts on mmap'd stacks with guard pages, switched in user
// space, with the AddressSanitizer annotations every switch needs.
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace braid::simt {

// A suspended (or the running) execution context and the stack it runs on. The host thread's own
// context has no stack of ours; its bounds are learnt on the first switch away from it (ASan).
struct FiberContext {
#if defined(__x86_64__)
  void* sp = nullptr;  // the saved stack pointer; the callee-saved registers sit above it
#else
  ucontext_t context;
  void (*entry)(void*) = nullptr;  // what the fiber's first instruction calls
  void* arg = nullptr;
#endif
  char* stack_lo = nullptr;
  size_t stack_size = 0;
};

// Makes `fiber` (whose stack_lo/stack_size are set) start entry(arg) at the next switch to it.
// `entry` must never return: it ends with fiber_exit_to.
void fiber_prepare(FiberContext& fiber, void (*entry)(void*), void* arg);

// Saves the running context into `from` and resumes `to`; returns when something switches back
// to `from`.
void fiber_switch(FiberContext& from, FiberContext& to);

// Leaves the running fiber `from` for good (it is never resumed again) and resumes `to`.
[[noreturn]] void fiber_exit_to(FiberContext& from, FiberContext& to);

// The first call in every fiber's entry function: completes the switch that started it.
void fiber_started();

// Forgets AddressSanitizer's view of a stack whose fiber was abandoned mid-call (its frames'
// redzones would otherwise stay poisoned for the next fiber on that stack). No-op without ASan.
void fiber_forget_stack(const FiberContext& fiber);

// Stacks for up to `count` fibers, each `stack_bytes` with an inaccessible guard page below it
// (an overflow faults instead of running into the neighbour). Grows; never shrinks.
class StackPool {
 public:
  StackPool() = default;
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // Ensures `count` stacks; invalidates earlier stacks' addresses when it has to grow.
  void reserve(size_t count);
  char* stack(size_t i) const { return base_ + i * stride_ + guard_; }
  size_t stack_bytes() const { return stride_ - guard_; }
  // The whole mapping, guard pages included, for classifying addresses.
  const char* lo() const { return base_; }
  const char* hi() const { return base_ + count_ * stride_; }

 private:
  char* base_ = nullptr;
  size_t count_ = 0;
  size_t stride_ = 0;
  size_t guard_ = 0;
};

}  // namespace braid::simt
