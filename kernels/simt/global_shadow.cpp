// The per-launch block-level shadow of device memory (global_shadow.h).
#include "global_shadow.h"

#include <algorithm>

namespace braid::simt {
namespace {

constexpr uint32_t kAtomicBit = 1u << 31;
constexpr uint32_t kSeveralBit = 1u << 31;
constexpr uint32_t kBlockMask = (1u << 30) - 1;

}  // namespace

GlobalShadow::Cell* GlobalShadow::fill_page(uintptr_t number) {
  std::unique_ptr<Cell[]>& slot = pages_[number];
  if (!slot) slot = std::make_unique<Cell[]>(size_t{1} << kPageBits);
  cached_number_ = number;
  cached_ = slot.get();
  return cached_;
}

GlobalShadow::Conflict GlobalShadow::access(const char* p, size_t bytes, uint64_t block,
                                            Access access) {
  const uint32_t me = static_cast<uint32_t>(block) + 1;
  const auto address = reinterpret_cast<uintptr_t>(p);
  constexpr uintptr_t kOffsetMask = (uintptr_t{1} << kPageBits) - 1;
  // Nearly every access lies in one page; the rest go page by page.
  size_t done = 0;
  while (done < bytes) {
    const uintptr_t at = address + done;
    const size_t in_page = std::min<size_t>(bytes - done, (kOffsetMask + 1) - (at & kOffsetMask));
    const Conflict c =
        access_cells(page(at >> kPageBits) + (at & kOffsetMask), p + done, in_page, me, access);
    if (c.hazard != Hazard::none) return c;
    done += in_page;
  }
  return {};
}

GlobalShadow::Conflict GlobalShadow::access_cells(Cell* cells, const char* p, size_t bytes,
                                                  uint32_t me, Access access) {
  const bool atomic = (access & kAtomic) != 0;
  // A race needs a plain (non-atomic) write (see checker.cpp).
  const bool plain_write = (access & kWrite) && !atomic;
  for (size_t i = 0; i < bytes; ++i) {
    const Cell& c = cells[i];
    const uint32_t writer = c.writer & kBlockMask;
    if (writer != 0 && writer != me) {
      const bool writer_atomic = (c.writer & kAtomicBit) != 0;
      if (!writer_atomic || plain_write)
        return {(access & kWrite) ? Hazard::write_after_write : Hazard::read_after_write, p + i,
                writer - 1, true, writer_atomic};
    }
    if (plain_write) {
      const uint32_t reader = c.reader & kBlockMask;
      if (reader != 0 && (reader != me || (c.reader & kSeveralBit)))
        return {Hazard::write_after_read, p + i, reader - 1, reader != me, false};
    }
  }
  for (size_t i = 0; i < bytes; ++i) {
    Cell& c = cells[i];
    if (access & kWrite) {
      c.writer = me | (atomic ? kAtomicBit : 0);
    } else if (c.reader != me) {
      const uint32_t reader = c.reader & kBlockMask;
      if (reader == 0)
        c.reader = me;
      else if (reader != me)
        c.reader |= kSeveralBit;
    }
  }
  return {};
}

}  // namespace braid::simt
