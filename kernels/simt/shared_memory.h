// The block's shared memory: an arena laid out per block (the dynamic region first, then each
// static __shared__ array when its declaration first runs), redzones between arrays, and one
// shadow cell per byte for the checker (owning array, initialisation, last writer, readers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::simt {

struct Block;

enum SharedFlags : uint8_t {
  kWritten = 1,        // written since the block started (else uninitialised)
  kAtomicWrite = 2,    // the last write was atomic
  kInFlight = 4,       // the destination of a cp.async not waited for yet
  kAtomicReader0 = 8,  // readers[0] / readers[1] read atomically
  kAtomicReader1 = 16,
};

// All zero is a clean byte outside every array.
struct SharedCell {
  uint16_t array;       // 1 + index of the owning array; 0: a redzone
  uint16_t writer;      // linear thread of the last write (valid with kWritten)
  uint16_t readers[2];  // 1 + linear thread of a read in read_epoch since the last write; 0: none
  uint8_t flags;
  uint32_t write_epoch;  // barrier epoch of the last write
  uint32_t write_sync;   // the writer's warp's __syncwarp count at that write
  uint32_t read_epoch;
  uint32_t read_sync[2];
  uintptr_t write_pc;  // code addresses, for reports
  uintptr_t read_pc[2];
};

struct SharedArray {
  const void* slot = nullptr;  // the declaration (its SharedSlot); null for the dynamic region
  size_t offset = 0;
  size_t bytes = 0;
  const char* name = "";
  const char* type = "";
};

class SharedArena {
 public:
  // Above the largest opt-in dynamic shared memory of any device (227 KiB) plus 48 KiB static.
  static constexpr size_t kBytes = size_t{512} << 10;
  // Unowned bytes around every array: an index one past an end (or before a start) lands here.
  static constexpr size_t kRedzone = 64;

  SharedArena();
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  char* base() const { return base_; }
  bool contains(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) - base_) < kBytes;
  }
  SharedCell* cells() const { return cells_; }
  const SharedArray& array(uint16_t id) const { return arrays_[id - 1u]; }

  // A new block: forgets the previous block's arrays and shadow, and lays out the launch's
  // dynamic shared memory (poisoned: 0xff bytes, uninitialised).
  void begin_block(Block& block, size_t dynamic_bytes);
  // The dynamic region (extern __shared__ T name[]).
  char* dynamic(const char* name);
  // The array of declaration `slot` in this block, laid out (poisoned) on its first use. Faults
  // when the block's static shared memory exceeds the device's limit.
  char* static_array(const void* slot, size_t bytes, size_t align, const char* name,
                     const char* type);

  // Where [offset, offset + bytes) lies, for messages: "at byte 12 of `partials` (float[32],
  // 128 bytes)", "right after the end of `tile` (float[31], 124 bytes)", "at 8 bytes before the
  // start of ...".
  std::string describe(size_t offset, size_t bytes) const;

 private:
  char* base_ = nullptr;
  SharedCell* cells_ = nullptr;
  std::vector<SharedArray> arrays_;
  size_t used_ = 0;  // bytes laid out (shadow beyond is clean)
  size_t static_bytes_ = 0;
  bool dynamic_named_ = false;
};

}  // namespace braid::simt
