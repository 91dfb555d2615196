// The state of the launch and block being emulated on this host thread: threads (fibers), the
// block barrier, warps, the pending fault. Shared by the scheduler, warp collectives and checker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "fiber.h"
#include "global_shadow.h"
#include "include/vector_types.h"
#include "launch.h"

namespace braid::simt {

class SharedArena;

// splitmix64: small, fast, and every seed gives a distinct stream.
struct Rng {
  uint64_t state = 0;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

enum class ThreadState : uint8_t { runnable, running, at_barrier, at_warp, exited };

// One cp.async in flight (async_copy.h): issued, maybe committed to a group, not yet waited for.
struct AsyncCopy {
  char* dst = nullptr;
  const char* src = nullptr;
  size_t bytes = 0;
  int64_t group = -1;  // -1: not committed yet
  std::source_location site;
};

struct SimThread {
  FiberContext context;
  uint32_t linear = 0;  // x + y * blockDim.x + z * blockDim.x * blockDim.y
  uint3 idx{};
  ThreadState state = ThreadState::runnable;
  // Where it waits (barrier or warp collective), for fault reports.
  std::source_location wait_site;
  const char* wait_op = nullptr;
  unsigned wait_mask = 0;
  std::vector<AsyncCopy> async_copies;
  int64_t async_groups = 0;  // groups committed so far
};

// A warp collective some lanes of `mask` have reached; it completes when all of them have.
struct PendingCollective {
  unsigned mask = 0;
  const char* op = nullptr;
  std::source_location site;
  size_t bytes = 0;
  unsigned arrived = 0;
  std::vector<unsigned char> values;  // 32 * bytes, lane by lane
  void* outs[32] = {};
};

struct WarpState {
  unsigned lanes = 0;       // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;      // lanes that returned from the kernel
  unsigned at_barrier = 0;  // lanes waiting at the block barrier
  std::vector<PendingCollective> pending;
  // The mask of every completed __syncwarp, in order: the race checker's ordering within a warp.
  std::vector<unsigned> syncs;
};

// What a fault records inside a fiber; the message is completed on the host thread, where code
// addresses ("{pc0}", "{pc1}" in details) are symbolised off the fibers' small stacks.
struct FaultRecord {
  std::string kind;
  std::string details;
  std::vector<uintptr_t> pcs;
};

// What fault() (fault.h) throws inside a fiber: it unwinds the thread's own stack (freeing what its
// callers' expressions hold) up to the fiber's entry, which then records it for the block. Not a
// std::exception, so kernel code cannot swallow it.
struct FiberFault {
  FaultRecord record;
};

// A read of never-written shared memory. Reported when the barrier interval ends, so that a write
// by another thread later in the same interval is reported as the race it is.
struct UninitRead {
  uint32_t thread = 0;
  size_t offset = 0;
  size_t bytes = 0;
  uintptr_t pc = 0;
};

struct LaunchState {
  const char* kernel_name = "";
  dim3 grid, block;
  size_t dynamic_smem = 0;
  uint64_t seed = 0;
  KernelInvoker invoke = nullptr;
  const void* params = nullptr;
  GlobalShadow global;
};

enum class BarrierKind : uint8_t { plain, count, all, any };

struct Block {
  LaunchState* launch = nullptr;
  uint3 index{};
  uint64_t linear = 0;
  uint32_t threads_count = 0;
  std::vector<SimThread> threads;
  std::vector<uint32_t> runnable;
  uint32_t exited = 0;
  Rng rng;
  FiberContext host;  // the scheduler's context on the host thread
  // All fibers' stacks: accesses there are thread-private and never checked.
  const char* stacks_lo = nullptr;
  const char* stacks_hi = nullptr;

  // The block barrier: the instance threads are arriving at, and the number completed so far
  // (the race checker's barrier epoch).
  uint32_t barrier_arrived = 0;
  std::source_location barrier_site;
  const char* barrier_op = nullptr;
  BarrierKind barrier_kind = BarrierKind::plain;
  int barrier_votes = 0;
  bool barrier_diverged = false;  // threads of this instance arrived from different call sites
  int barrier_result = 0;
  uint32_t epoch = 0;

  std::vector<WarpState> warps;
  SharedArena* arena = nullptr;
  std::optional<UninitRead> uninit_read;
  // Undefined behaviour UBSan reported in a kernel: raised as a fault a few memory accesses later
  // (the access the report is about may then fault with the checker's own, better message) or at
  // the thread's next scheduling point; never inside UBSan's report.
  std::optional<FaultRecord> undefined_behaviour;
  int undefined_behaviour_countdown = 0;
  std::optional<FaultRecord> fault;
};

// The block and thread running on this host thread; null outside emulated kernels.
extern thread_local Block* tls_block;
extern thread_local SimThread* tls_thread;

inline int lane_of(uint32_t linear) {
  return static_cast<int>(linear % 32);
}
inline int warp_of(uint32_t linear) {
  return static_cast<int>(linear / 32);
}

// ---- scheduler.cpp -----------------------------------------------------------------------------

// Runs one block of the launch to completion on this host thread; throws KernelFault.
void run_block(LaunchState& launch, uint64_t linear_block, uint3 block_index);

// The running thread, which has recorded why it waits, lets the others run until it is woken.
void block_wait();
// The running thread lets the others run (atomics: spin loops on shared flags make progress).
void block_yield();
// Makes a waiting thread runnable again.
void block_wake(SimThread& thread);
// Records a fault for the current block and abandons it (never returns to the caller).
[[noreturn]] void block_fault(FaultRecord record);
// The barrier completed: checks the interval's deferred reports.
void block_interval_ended(Block& block);
// Faults when UBSan reported undefined behaviour in the running thread: at once when `now`,
// else after a few more accesses.
inline void raise_undefined_behaviour(Block& block, bool now = true) {
  if (block.undefined_behaviour && (now || --block.undefined_behaviour_countdown <= 0)) {
    FaultRecord record = std::exchange(*block.undefined_behaviour, FaultRecord{});
    block.undefined_behaviour.reset();
    block_fault(std::move(record));
  }
}

// ---- fault.cpp ---------------------------------------------------------------------------------

// "1 byte", "4 bytes".
inline std::string byte_count(size_t n) {
  return std::to_string(n) + (n == 1 ? " byte" : " bytes");
}
// "(x, y, z)" of a linear thread index in `block`.
std::string thread_name(const Block& block, uint32_t linear);
// The lanes set in `mask` as ranges, "0-15, 20" ("none" for an empty mask).
std::string lane_ranges(unsigned mask);
// "(0, 0, 0)..(15, 0, 0), (32, 0, 0)" for a set of linear indices (compressed ranges).
std::string thread_list(const Block& block, std::vector<uint32_t> linear);
// "file:line" of a source location.
std::string site_name(const std::source_location& site);
// The completed message of a fault: "simt: <kind> in kernel <name>, block (x, y, z): <details>".
std::string fault_message(const LaunchState& launch, uint3 block_index, const FaultRecord& record);

}  // namespace braid::simt
