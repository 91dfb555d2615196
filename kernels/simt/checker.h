// The access checker: every instrumented load and store of kernel code, and every emulated atomic
// and copy, passes through here while an emulated thread runs. Shared memory: per-array bounds,
// initialisation, cp.async hazards and racecheck's rule; device memory: live allocations,
// initialisation, and races between the blocks of the launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "access.h"

namespace braid::simt {

struct Block;
struct SimThread;

// `aligned`: the compiler promised natural alignment (a sized access), so a misaligned address
// is a fault, as on the device. `pc`: the accessing instruction, for reports. No-op outside an
// emulated thread (host code of the kernel sources is instrumented too).
void check_access(const void* address, size_t bytes, Access access, uintptr_t pc, bool aligned);

// The shared-memory part, for the cp.async engine: `offset` into the block's arena.
void check_shared(Block& block, SimThread& thread, size_t offset, size_t bytes, Access access,
                  uintptr_t pc);
// The device-memory part: false when `address` is not device memory (then nothing was checked).
bool check_global(Block& block, SimThread& thread, const char* address, size_t bytes, Access access,
                  uintptr_t pc);
// The same for an address known to be in the device arena.
void check_device(Block& block, SimThread& thread, const char* address, size_t bytes, Access access,
                  uintptr_t pc);

// The return address into the code that called the current function (kernel code, for the
// hooks and built-ins): what reports symbolise.
#define BRAID_SIMT_CALLER_PC() \
  reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)))

}  // namespace braid::simt
