// Which block of the current launch wrote or read each byte of device memory: blocks of one
// launch are unordered, so two of them touching a byte is a race when one of them writes it
// without an atomic. A page table filled on demand; one per launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "access.h"

namespace braid::simt {

class GlobalShadow {
 public:
  // Blocks are tracked by linear index below this (larger grids go unchecked past it).
  static constexpr uint64_t kMaxBlocks = (uint64_t{1} << 30) - 1;

  enum class Hazard : uint8_t { none, read_after_write, write_after_read, write_after_write };
  struct Conflict {
    Hazard hazard = Hazard::none;
    const char* address = nullptr;  // the first byte in conflict
    uint64_t other_block = 0;
    bool other_known = true;  // false: "other blocks" (several read it)
    bool other_atomic = false;
  };

  // Records an access of `bytes` at `p` by `block` (< kMaxBlocks); returns the first conflict
  // with another block's earlier access, if any (then nothing is recorded).
  Conflict access(const char* p, size_t bytes, uint64_t block, Access access);

 private:
  // writer: 1 + block of the last write, bit 31 set when it was atomic.
  // reader: 1 + block of the first read, bit 31: other blocks read too.
  struct Cell {
    uint32_t writer = 0;
    uint32_t reader = 0;
  };
  static constexpr size_t kPageBits = 12;
  Cell* page(uintptr_t number) { return number == cached_number_ ? cached_ : fill_page(number); }
  Cell* fill_page(uintptr_t number);
  Conflict access_cells(Cell* cells, const char* p, size_t bytes, uint32_t me, Access access);

  std::unordered_map<uintptr_t, std::unique_ptr<Cell[]>> pages_;
  uintptr_t cached_number_ = ~uintptr_t{0};
  Cell* cached_ = nullptr;
};

}  // namespace braid::simt
