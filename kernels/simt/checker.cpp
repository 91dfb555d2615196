// The access checker (checker.h). Faults are built inside lambdas: the faulting fiber is abandoned
// without unwinding, so nothing in its frames may own memory.
#include "checker.h"

#include <fmt/format.h>

#include <string>

#include "block.h"
#include "device_memory.h"
#include "shared_memory.h"

namespace braid::simt {
namespace {

const char* verb(Access access) {
  switch (access) {
    case kRead:
      return "reads";
    case kWrite:
      return "writes";
    case kAtomicLoad:
      return "atomically loads";
    case kAtomicStore:
      return "atomically stores";
    default:
      return "atomically updates";
  }
}

const char* past_verb(bool write, bool atomic) {
  if (write) return atomic ? "atomically wrote" : "wrote";
  return atomic ? "atomically read" : "read";
}

std::string allocation_text(const Allocation& a) {
  return fmt::format("allocation #{} ({} bytes at {})", a.id, a.bytes,
                     static_cast<const void*>(a.base));
}

// True when a __syncwarp that both lanes took part in completed between the other access (at
// the warp's sync count `other_sync`) and now: racecheck's ordering within a warp.
bool synced_in_warp(const Block& block, uint32_t other, uint32_t other_sync, uint32_t me) {
  if (warp_of(other) != warp_of(me)) return false;
  const WarpState& warp = block.warps[warp_of(me)];
  const unsigned both = (1u << lane_of(other)) | (1u << lane_of(me));
  for (size_t s = other_sync; s < warp.syncs.size(); ++s)
    if ((warp.syncs[s] & both) == both) return true;
  return false;
}

// Whether the access of `other` (recorded in barrier epoch `epoch` at sync count `sync`) is
// ordered before the running thread's access now.
bool ordered(const Block& block, uint32_t other, uint32_t epoch, uint32_t sync, uint32_t me) {
  return other == me || epoch != block.epoch || synced_in_warp(block, other, sync, me);
}

const char* hazard_name(bool earlier_write, bool now_write) {
  if (earlier_write) return now_write ? "write after write" : "read after write";
  return "write after read";
}

[[noreturn]] void shared_race(Block& block, uint32_t me, size_t offset, size_t bytes, Access access,
                              uintptr_t pc, uint32_t other, bool other_write, bool other_atomic,
                              uintptr_t other_pc) {
  block_fault([&] {
    return FaultRecord{
        "data race on shared memory",
        "thread " + thread_name(block, me) + " " + verb(access) + " " + byte_count(bytes) + " " +
            block.arena->describe(offset, bytes) + " at {pc0}; thread " +
            thread_name(block, other) + " " + past_verb(other_write, other_atomic) +
            " them at {pc1}, with no __syncthreads (or __syncwarp of both) between (" +
            hazard_name(other_write, (access & kWrite) != 0) + ")",
        {pc, other_pc}};
  }());
}

[[noreturn]] void in_flight_fault(Block& block, uint32_t me, size_t offset, size_t bytes,
                                  Access access, uintptr_t pc) {
  block_fault([&] {
    const char* at = block.arena->base() + offset;
    std::string owner = "a thread";
    std::string site = "an unknown site";
    for (uint32_t i = 0; i < block.threads_count; ++i)
      for (const AsyncCopy& c : block.threads[i].async_copies)
        if (at >= c.dst && at < c.dst + c.bytes) {
          owner = "thread " + thread_name(block, i);
          site = site_name(c.site);
        }
    return FaultRecord{"cp.async hazard",
                       "thread " + thread_name(block, me) + " " + verb(access) + " " +
                           byte_count(bytes) + " " + block.arena->describe(offset, bytes) +
                           " at {pc0} while " + owner + "'s cp.async into them (" + site +
                           ") is still in flight: its group was not waited for "
                           "(cp.async.wait_group / wait_all, then a barrier)",
                       {pc}};
  }());
}

}  // namespace

void check_shared(Block& block, SimThread& thread, size_t offset, size_t bytes, Access access,
                  uintptr_t pc) {
  SharedCell* cells = block.arena->cells();
  const uint32_t me = thread.linear;
  const size_t end = offset + bytes;
  bool out_of_bounds = end > SharedArena::kBytes || cells[offset].array == 0;
  for (size_t i = offset + 1; !out_of_bounds && i < end; ++i)
    out_of_bounds = cells[i].array != cells[offset].array;
  if (out_of_bounds) {
    block_fault([&] {
      return FaultRecord{"out-of-bounds shared memory access",
                         "thread " + thread_name(block, me) + " " + verb(access) + " " +
                             byte_count(bytes) + " " + block.arena->describe(offset, bytes) +
                             " at {pc0}",
                         {pc}};
    }());
  }
  const uint32_t epoch = block.epoch;
  const auto sync = static_cast<uint32_t>(block.warps[warp_of(me)].syncs.size());
  const bool atomic = (access & kAtomic) != 0;
  for (size_t i = offset; i < end; ++i) {
    SharedCell& c = cells[i];
    if (c.flags & kInFlight) in_flight_fault(block, me, offset, bytes, access, pc);
    const bool written = (c.flags & kWritten) != 0;
    // A race needs a plain (non-atomic) write: atomics never race with each other, and a plain
    // read of atomically updated memory is the first guess of CUDA's own compare-and-swap loops.
    const bool plain_write = (access & kWrite) && !atomic;
    if (written && (!(c.flags & kAtomicWrite) || plain_write) &&
        !ordered(block, c.writer, c.write_epoch, c.write_sync, me))
      shared_race(block, me, offset, bytes, access, pc, c.writer, true,
                  (c.flags & kAtomicWrite) != 0, c.write_pc);
    if (access & kRead) {
      if (!written && !block.uninit_read) block.uninit_read = UninitRead{me, offset, bytes, pc};
    }
    if (plain_write) {
      if (c.read_epoch == epoch) {
        for (int r = 0; r < 2; ++r) {
          if (c.readers[r] == 0) continue;
          const bool reader_atomic = (c.flags & (r == 0 ? kAtomicReader0 : kAtomicReader1)) != 0;
          const uint32_t reader = c.readers[r] - 1u;
          if (!ordered(block, reader, epoch, c.read_sync[r], me))
            shared_race(block, me, offset, bytes, access, pc, reader, false, reader_atomic,
                        c.read_pc[r]);
        }
      }
    }
  }
  for (size_t i = offset; i < end; ++i) {
    SharedCell& c = cells[i];
    if (access & kWrite) {
      // A write orders every earlier read of the byte before the next access (that was checked
      // above), so the readers are forgotten and only the write is remembered.
      c.writer = static_cast<uint16_t>(me);
      c.write_epoch = epoch;
      c.write_sync = sync;
      c.write_pc = pc;
      c.flags = static_cast<uint8_t>(kWritten | (atomic ? kAtomicWrite : 0));
      c.readers[0] = c.readers[1] = 0;
      continue;
    }
    const auto id = static_cast<uint16_t>(me + 1);
    int r;
    if (c.read_epoch != epoch) {
      c.read_epoch = epoch;
      c.readers[0] = c.readers[1] = 0;
      c.flags &= static_cast<uint8_t>(~(kAtomicReader0 | kAtomicReader1));
      r = 0;
    } else if (c.readers[0] == id || c.readers[0] == 0) {
      r = 0;
    } else if (c.readers[1] == id || c.readers[1] == 0) {
      r = 1;
    } else {
      continue;  // two other readers are remembered: enough to catch a later writer
    }
    c.readers[r] = id;
    c.read_sync[r] = sync;
    c.read_pc[r] = pc;
    const uint8_t bit = r == 0 ? kAtomicReader0 : kAtomicReader1;
    c.flags = static_cast<uint8_t>(atomic ? (c.flags | bit) : (c.flags & ~bit));
  }
}

bool check_global(Block& block, SimThread& thread, const char* address, size_t bytes, Access access,
                  uintptr_t pc) {
  if (!in_device_arena(address)) return false;
  check_device(block, thread, address, bytes, access, pc);
  return true;
}

void check_device(Block& block, SimThread& thread, const char* address, size_t bytes, Access access,
                  uintptr_t pc) {
  const uint32_t me = thread.linear;
  const Allocation* allocation = find_allocation(address, bytes);
  if (allocation == nullptr) {
    block_fault([&] {
      // Probe around the address for the allocation it strayed from.
      std::string where = "in no live allocation";
      if (const Allocation* a = find_allocation(address, 1)) {
        where = fmt::format("at offset {} of {}, running {} bytes past its end", address - a->base,
                            allocation_text(*a), address + bytes - (a->base + a->bytes));
      } else {
        for (size_t d = 1; d <= (size_t{1} << 24); d *= 2) {
          if (const Allocation* a = find_allocation(address - d, 1)) {
            const auto past = static_cast<size_t>(address - (a->base + a->bytes));
            where = past == 0
                        ? "right after the end of " + allocation_text(*a)
                        : fmt::format("{} bytes after the end of {}", past, allocation_text(*a));
            break;
          }
          if (const Allocation* a = find_allocation(address + bytes - 1 + d, 1)) {
            where = fmt::format("{} bytes before the start of {}", a->base - address,
                                allocation_text(*a));
            break;
          }
        }
      }
      return FaultRecord{
          "out-of-bounds global memory access",
          fmt::format("thread {} {} {} at {} at {{pc0}}: {}", thread_name(block, me), verb(access),
                      byte_count(bytes), static_cast<const void*>(address), where),
          {pc}};
    }());
  }
  if (access & kRead) {
    if (const void* missing = first_uninitialized(address, bytes)) {
      block_fault([&] {
        return FaultRecord{
            "uninitialised global memory read",
            fmt::format("thread {} {} {} at offset {} of {} at {{pc0}}; byte {} was never "
                        "written (device memory starts uninitialised: write or memset it first)",
                        thread_name(block, me), verb(access), byte_count(bytes),
                        address - allocation->base, allocation_text(*allocation),
                        static_cast<const char*>(missing) - allocation->base),
            {pc}};
      }());
    }
  }
  if (access & kWrite) mark_initialized(address, bytes);
  if (block.linear < GlobalShadow::kMaxBlocks) {
    const GlobalShadow::Conflict c =
        block.launch->global.access(address, bytes, block.linear, access);
    if (c.hazard != GlobalShadow::Hazard::none) {
      block_fault([&] {
        const dim3 grid = block.launch->grid;
        const uint64_t o = c.other_block;
        const std::string other =
            c.other_known ? fmt::format("block ({}, {}, {})", o % grid.x, o / grid.x % grid.y,
                                        o / (uint64_t{grid.x} * grid.y))
                          : std::string("other blocks");
        const bool earlier_write = c.hazard != GlobalShadow::Hazard::write_after_read;
        return FaultRecord{
            "data race on global memory",
            fmt::format("thread {} {} {} at offset {} of {} at {{pc0}}; {} {} byte {} "
                        "earlier in this launch ({}): the blocks of a launch are unordered, "
                        "so only atomics may share a location one of them writes",
                        thread_name(block, me), verb(access), byte_count(bytes),
                        address - allocation->base, allocation_text(*allocation), other,
                        past_verb(earlier_write, c.other_atomic), c.address - allocation->base,
                        hazard_name(earlier_write, (access & kWrite) != 0)),
            {pc}};
      }());
    }
  }
}

void check_access(const void* address, size_t bytes, Access access, uintptr_t pc, bool aligned) {
  SimThread* thread = tls_thread;
  if (thread == nullptr || bytes == 0) return;
  Block& block = *tls_block;
  const char* p = static_cast<const char*>(address);
  SharedArena& arena = *block.arena;
  // The order follows the frequency: thread-private stack, then shared, then device memory;
  // anything else (host memory, thread-locals such as threadIdx) is not the checker's.
  if (p >= block.stacks_lo && p < block.stacks_hi) {
    raise_undefined_behaviour(block, false);
    return;
  }
  const bool shared = arena.contains(p);
  if (!shared && !in_device_arena(p)) {
    raise_undefined_behaviour(block, false);
    return;
  }
  if (aligned && bytes > 1 && (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) != 0) {
    block_fault([&] {
      return FaultRecord{"misaligned access",
                         fmt::format("thread {} {} {} at {} at {{pc0}}, which is not a "
                                     "multiple of {} (the device faults on misaligned accesses)",
                                     thread_name(block, thread->linear), verb(access),
                                     byte_count(bytes), address, bytes),
                         {pc}};
    }());
  }
  if (shared)
    check_shared(block, *thread, static_cast<size_t>(p - arena.base()), bytes, access, pc);
  else
    check_device(block, *thread, p, bytes, access, pc);
  // After this access's own checks, which name it better (UBSan reports just before it).
  raise_undefined_behaviour(block, false);
}

}  // namespace braid::simt
