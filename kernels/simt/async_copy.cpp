// The emulated cp.async (async_copy.h): a copy stays in flight, its shared destination marked,
// until the issuing thread waits for its group; only then are the bytes copied (and checked as
// that thread's write), so a missing wait shows as a read of in-flight bytes.
#include "async_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "block.h"
#include "checker.h"
#include "fault.h"
#include "shared_memory.h"

namespace braid::simt {
namespace {

SimThread& issuing_thread(const char* op) {
  if (tls_thread == nullptr)
    throw KernelFault(std::string("simt: ") + op + " called outside an emulated kernel");
  return *tls_thread;
}

[[noreturn]] void copy_fault(const Block& block, const SimThread& thread, const char* problem,
                             const void* dst, const void* src, size_t bytes,
                             const std::source_location& site) {
  block_fault([&] {
    return FaultRecord{
        "cp.async hazard",
        fmt::format("thread {} issues cp.async of {} bytes from {} to {} at {}: {}",
                    thread_name(block, thread.linear), bytes, src, dst, site_name(site), problem),
        {}};
  }());
}

// Performs (copies and checks) the thread's in-flight copies that `due` selects.
template <class Due>
void complete(Block& block, SimThread& thread, uintptr_t pc, Due due) {
  SharedArena& arena = *block.arena;
  for (const AsyncCopy& c : thread.async_copies) {
    if (!due(c)) continue;
    const auto offset = static_cast<size_t>(c.dst - arena.base());
    for (size_t i = 0; i < c.bytes; ++i)
      arena.cells()[offset + i].flags &= static_cast<uint8_t>(~kInFlight);
    check_shared(block, thread, offset, c.bytes, kWrite, pc);
    std::memcpy(c.dst, c.src, c.bytes);
  }
  std::erase_if(thread.async_copies, due);
}

}  // namespace

void async_copy_issue(void* dst, const void* src, size_t bytes, const std::source_location& site) {
  SimThread& thread = issuing_thread("cp.async");
  Block& block = *tls_block;
  const uintptr_t pc = BRAID_SIMT_CALLER_PC();
  SharedArena& arena = *block.arena;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Sizes and alignment are the PTX instruction's business (device_intrinsics.cuh checks them):
  // its zero-fill tail, for one, is an odd-sized copy from a constant.
  if (bytes == 0) return;
  if (!arena.contains(d) || !arena.contains(d + bytes - 1))
    copy_fault(block, thread, "the destination is not the block's shared memory", dst, src, bytes,
               site);
  const auto offset = static_cast<size_t>(d - arena.base());
  const SharedCell* cells = arena.cells();
  for (size_t i = 0; i < bytes; ++i) {
    if (cells[offset + i].array == 0 || cells[offset + i].array != cells[offset].array) {
      block_fault([&] {
        return FaultRecord{"out-of-bounds shared memory access",
                           fmt::format("thread {} issues cp.async of {} bytes at {} into {}",
                                       thread_name(block, thread.linear), bytes, site_name(site),
                                       arena.describe(offset, bytes)),
                           {}};
      }());
    }
    if (cells[offset + i].flags & kInFlight)
      copy_fault(block, thread,
                 "another cp.async into these bytes is still in flight (not waited for)", dst, src,
                 bytes, site);
  }
  // A device source is read as the copy is issued: bounds, initialisation, races between blocks.
  // (Anything else is constant data of the emulation, such as the zero-fill's zeros.)
  check_global(block, thread, s, bytes, kRead, pc);
  for (size_t i = 0; i < bytes; ++i) arena.cells()[offset + i].flags |= kInFlight;
  thread.async_copies.push_back(AsyncCopy{d, s, bytes, -1, site});
}

void async_copy_commit() {
  SimThread& thread = issuing_thread("cp.async.commit_group");
  for (AsyncCopy& c : thread.async_copies)
    if (c.group < 0) c.group = thread.async_groups;
  ++thread.async_groups;  // an empty group counts too, as on the device
}

void async_copy_wait(int n) {
  SimThread& thread = issuing_thread("cp.async.wait_group");
  const int64_t limit = thread.async_groups - std::max(n, 0);
  complete(*tls_block, thread, BRAID_SIMT_CALLER_PC(),
           [limit](const AsyncCopy& c) { return c.group >= 0 && c.group < limit; });
}

void async_copy_wait_all() {
  SimThread& thread = issuing_thread("cp.async.wait_all");
  ++thread.async_groups;  // wait_all is commit_group followed by wait_group 0
  complete(*tls_block, thread, BRAID_SIMT_CALLER_PC(), [](const AsyncCopy&) { return true; });
}

}  // namespace braid::simt
