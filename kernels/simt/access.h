// The kinds of memory access the checker tells apart: plain or atomic, reading, writing or both.
#pragma once

#include <cstdint>

namespace braid::simt {

enum Access : uint8_t {
  kRead = 1,
  kWrite = 2,
  kAtomic = 4,
  kAtomicLoad = kRead | kAtomic,
  kAtomicStore = kWrite | kAtomic,
  kAtomicUpdate = kRead | kWrite | kAtomic,  // read-modify-write (atomicAdd, CAS, ...)
};

}  // namespace braid::simt
