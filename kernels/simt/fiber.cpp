// Fiber switching. On x86-64 a ten-instruction routine saves the callee-saved registers and the
// floating-point control words: swapcontext would also make a sigprocmask system call per switch
// (~0.3 us here), which dominates kernels full of warp collectives. Elsewhere, ucontext.
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "braid/core/error.h"

extern "C" {
// Weak: defined only when the binary links a sanitizer runtime, and then every switch must be
// announced, or ASan takes the fiber's stack for a wild one and reports false errors.
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size)
    __attribute__((weak));
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     size_t* size_old) __attribute__((weak));
void __asan_unpoison_memory_region(const volatile void* addr, size_t size) __attribute__((weak));
}

#if defined(__x86_64__)
// braid_simt_switch_stacks(save_sp, next_sp): pushes what the SysV ABI says a callee preserves
// (rbp, rbx, r12-r15, MXCSR and the x87 control word), stores rsp in *save_sp, loads next_sp and
// pops the same frame from there. A new fiber's frame "returns" into the trampoline, which calls
// entry(arg) from r12/r13 on a 16-byte aligned stack and must never come back.
asm(R"(
  .text
  .p2align 4
  .globl braid_simt_switch_stacks
  .hidden braid_simt_switch_stacks
  .type braid_simt_switch_stacks, @function
braid_simt_switch_stacks:
  .cfi_startproc
  pushq %rbp
  .cfi_adjust_cfa_offset 8
  pushq %rbx
  .cfi_adjust_cfa_offset 8
  pushq %r12
  .cfi_adjust_cfa_offset 8
  pushq %r13
  .cfi_adjust_cfa_offset 8
  pushq %r14
  .cfi_adjust_cfa_offset 8
  pushq %r15
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size braid_simt_switch_stacks, .-braid_simt_switch_stacks

  .p2align 4
  .globl braid_simt_fiber_trampoline
  .hidden braid_simt_fiber_trampoline
  .type braid_simt_fiber_trampoline, @function
braid_simt_fiber_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r13, %rdi
  callq *%r12
  ud2
  .cfi_endproc
  .size braid_simt_fiber_trampoline, .-braid_simt_fiber_trampoline
)");
extern "C" void braid_simt_switch_stacks(void** save_sp, void* next_sp);
extern "C" void braid_simt_fiber_trampoline();
#endif

namespace braid::simt {
namespace {

// The context a switch leaves, for the side that resumes: when it is the host thread's (no stack
// of ours), ASan tells the resumed side where that stack is, and it is recorded for the way back.
thread_local FiberContext* tls_switching_from = nullptr;

void announce(void** fake_stack, const FiberContext& to) {
  if (__sanitizer_start_switch_fiber != nullptr)
    __sanitizer_start_switch_fiber(fake_stack, to.stack_lo, to.stack_size);
}

void arrived(void* fake_stack) {
  if (__sanitizer_finish_switch_fiber == nullptr) return;
  const void* old_lo = nullptr;
  size_t old_size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &old_lo, &old_size);
  FiberContext* from = tls_switching_from;
  if (from != nullptr && from->stack_lo == nullptr) {
    from->stack_lo = static_cast<char*>(const_cast<void*>(old_lo));
    from->stack_size = old_size;
  }
}

#if !defined(__x86_64__)
// makecontext passes ints only: the context's address arrives in two halves.
void ucontext_entry(unsigned hi, unsigned lo) {
  auto* fiber = reinterpret_cast<FiberContext*>((uintptr_t{hi} << 32) | lo);
  fiber->entry(fiber->arg);
  std::abort();  // entries never return
}
#endif

size_t page_size() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// BRAID_SIMT_STACK_KB (default 128): kernels with large per-thread arrays may need more.
size_t configured_stack_bytes() {
  size_t kib = 128;
  if (const char* env = std::getenv("BRAID_SIMT_STACK_KB"); env != nullptr && *env != '\0')
    kib = std::strtoul(env, nullptr, 10);
  if (kib < 16) kib = 16;
  const size_t page = page_size();
  return (kib * 1024 + page - 1) / page * page;
}

}  // namespace

void fiber_prepare(FiberContext& fiber, void (*entry)(void*), void* arg) {
  // The previous fiber on this stack left its entry frames (which never return) poisoned.
  constexpr size_t kEntryFrames = 8192;
  if (__asan_unpoison_memory_region != nullptr && fiber.stack_size > kEntryFrames)
    __asan_unpoison_memory_region(fiber.stack_lo + fiber.stack_size - kEntryFrames, kEntryFrames);
#if defined(__x86_64__)
  auto top = reinterpret_cast<uintptr_t>(fiber.stack_lo + fiber.stack_size) & ~uintptr_t{15};
  // Ten words: the control words, r15, r14, r13 (arg), r12 (entry), rbx, rbp, the return address
  // (the trampoline) and two of padding, so that rsp is 16-byte aligned when the trampoline runs.
  auto* frame = reinterpret_cast<uint64_t*>(top - 80);
  uint32_t mxcsr = 0;
  uint16_t fpu_cw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_cw));
  frame[0] = mxcsr | (uint64_t{fpu_cw} << 32);
  frame[1] = 0;
  frame[2] = 0;
  frame[3] = reinterpret_cast<uint64_t>(arg);
  frame[4] = reinterpret_cast<uint64_t>(entry);
  frame[5] = 0;
  frame[6] = 0;
  frame[7] = reinterpret_cast<uint64_t>(&braid_simt_fiber_trampoline);
  frame[8] = 0;
  frame[9] = 0;
  fiber.sp = frame;
#else
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = fiber.stack_lo;
  fiber.context.uc_stack.ss_size = fiber.stack_size;
  fiber.context.uc_link = nullptr;
  fiber.entry = entry;
  fiber.arg = arg;
  const auto address = reinterpret_cast<uintptr_t>(&fiber);
  makecontext(&fiber.context, reinterpret_cast<void (*)()>(ucontext_entry), 2,
              static_cast<unsigned>(address >> 32), static_cast<unsigned>(address));
#endif
}

void fiber_switch(FiberContext& from, FiberContext& to) {
  void* fake_stack = nullptr;
  announce(&fake_stack, to);
  tls_switching_from = &from;
#if defined(__x86_64__)
  braid_simt_switch_stacks(&from.sp, to.sp);
#else
  swapcontext(&from.context, &to.context);
#endif
  arrived(fake_stack);
}

void fiber_exit_to(FiberContext& from, FiberContext& to) {
  announce(nullptr, to);  // nullptr: this stack is done, ASan may drop its fake frames
  tls_switching_from = &from;
#if defined(__x86_64__)
  braid_simt_switch_stacks(&from.sp, to.sp);
#else
  swapcontext(&from.context, &to.context);
#endif
  std::abort();  // never resumed
}

void fiber_started() {
  arrived(nullptr);
}

void fiber_forget_stack(const FiberContext& fiber) {
  if (__asan_unpoison_memory_region != nullptr && fiber.stack_lo != nullptr)
    __asan_unpoison_memory_region(fiber.stack_lo, fiber.stack_size);
}

StackPool::~StackPool() {
  if (base_ != nullptr) munmap(base_, count_ * stride_);
}

void StackPool::reserve(size_t count) {
  if (count <= count_) return;
  if (stride_ == 0) {
    guard_ = page_size();
    stride_ = configured_stack_bytes() + guard_;
  }
  size_t grown = count_ == 0 ? 32 : count_;
  while (grown < count) grown *= 2;
  if (base_ != nullptr) munmap(base_, count_ * stride_);
  base_ = nullptr;
  count_ = 0;
  // MAP_NORESERVE: only the pages a fiber touches cost memory.
  void* mapping = mmap(nullptr, grown * stride_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED)
    throw Error("simt: cannot map " + std::to_string(grown) + " fiber stacks of " +
                std::to_string(stride_) + " bytes");
  base_ = static_cast<char*>(mapping);
  count_ = grown;
  for (size_t i = 0; i < grown; ++i) mprotect(base_ + i * stride_, guard_, PROT_NONE);
}

}  // namespace braid::simt
