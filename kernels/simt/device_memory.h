// The emulated device's global memory: a guarded arena the host cannot touch, allocations with
// bounds, and an initialisation shadow, shared by the emulated runtime and the access checker.
//
// INTERFACE between the emulator's parts: implemented in runtime/device_memory.cpp, used by the
// CUDA runtime shims (cudaMalloc, copies, memsets) and by the access checker (checker.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid::simt {

// A live allocation, as the checker reports it.
struct Allocation {
  const char* base = nullptr;
  size_t bytes = 0;
  uint64_t id = 0;  // allocation number, counting from 1, for messages
};

// Sets the capacity of device memory (the configured device model's global memory). Called by
// the runtime before the first allocation.
void set_device_memory_capacity(size_t bytes);
size_t device_memory_capacity();
size_t device_memory_in_use();

// A new allocation of `bytes` (> 0) in the guarded arena, 256-byte aligned as cudaMalloc's are.
// Its contents are poisoned (0xff bytes: NaN as float) and marked uninitialised. Returns nullptr
// when the capacity is exhausted (cudaMalloc then reports cudaErrorMemoryAllocation).
void* device_allocate(size_t bytes);
// Frees an allocation made by device_allocate; false when `ptr` is not the start of a live one.
bool device_free(void* ptr);

// The live allocation holding [ptr, ptr + bytes), or nullptr. Fast (the checker calls it for
// every access into the arena).
const Allocation* find_allocation(const void* ptr, size_t bytes = 1);
// True when `ptr` lies in the arena at all (a live allocation or not).
bool in_device_arena(const void* ptr);

// Device memory is PROT_NONE except while at least one DeviceAccess lives (on any thread): the
// runtime's copies and memsets and a kernel launch hold one, so any other host read or write of
// device memory faults (SIGSEGV, with ASan's or the default stack trace). Re-entrant.
// Limit: protection is per process, not per thread. One mprotect opens the whole arena when the
// first DeviceAccess starts and one closes it when the last ends, so while any thread holds one,
// every other host thread's touches of device memory go uncaught.
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// The initialisation shadow, one bit per byte of the arena.
void mark_initialized(const void* ptr, size_t bytes);
// The first byte of [ptr, ptr + bytes) never written, or nullptr when all were.
const void* first_uninitialized(const void* ptr, size_t bytes);
// Device-to-device copies carry the shadow along with the bytes.
void copy_initialization(void* dst, const void* src, size_t bytes);

}  // namespace braid::simt
