// KernelFault: what the emulator throws out of a launch when a kernel breaks CUDA's rules.
//
// INTERFACE between the emulator's parts: thrown by the scheduler and the checker, caught by
// tests; declared here so every part reports alike.
#pragma once

#include <string>

#include "braid/core/error.h"

namespace braid::simt {

// what(): "simt: <kind> in kernel <name>, block (x, y, z): <details>", e.g. a barrier not every
// thread reached (the threads waiting and those that exited), a data race (the two accesses:
// threads, read/write, source site when known), an access out of bounds, a read of
// uninitialised memory. The launch is abandoned; the runtime's sticky error stays unset.
class KernelFault : public Error {
 public:
  using Error::Error;
};

// Throws KernelFault for the calling emulated thread's kernel and block: "<kind>" and "<details>"
// as above, the details prefixed with "thread (x, y, z): ". Only inside a launch, and not from a
// noexcept frame: it unwinds the calling thread's own stack first, so its temporaries are freed.
[[noreturn]] void fault(const char* kind, const std::string& details);

}  // namespace braid::simt
