// The block scheduler: runs a block's threads as fibers in a seeded random order, each until it
// blocks (barrier, warp collective), yields (atomics) or exits; the block barrier and its checks.
#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "block.h"
#include "braid/core/error.h"
#include "builtins_memory.h"
#include "fault.h"
#include "fiber.h"
#include "shared_memory.h"

// The per-thread built-in variables the kernels read (builtins.h), set at every switch.
__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

namespace braid::simt {

thread_local Block* tls_block = nullptr;
thread_local SimThread* tls_thread = nullptr;

namespace {

// What one host thread keeps between blocks and launches: stacks, the shared arena, the block.
struct Worker {
  StackPool stacks;
  SharedArena arena;
  Block block;
};

Worker& worker() {
  thread_local std::unique_ptr<Worker> instance;
  if (!instance) instance = std::make_unique<Worker>();
  return *instance;
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::string_view(a.file_name()) == b.file_name());
}

// Makes `next` the running thread: the built-ins follow it.
void enter(SimThread& next) {
  next.state = ThreadState::running;
  tls_thread = &next;
  threadIdx = next.idx;
}

// A random runnable thread (removed from the runnable set), or null.
SimThread* pick(Block& block) {
  if (block.fault || block.runnable.empty()) return nullptr;
  const uint32_t i = block.rng.below(static_cast<uint32_t>(block.runnable.size()));
  std::swap(block.runnable[i], block.runnable.back());
  SimThread* next = &block.threads[block.runnable.back()];
  block.runnable.pop_back();
  return next;
}

// Leaves the running thread `self` (already marked waiting or runnable) for the next runnable
// thread, or for the host when none is left; returns when `self` runs again.
void switch_from(Block& block, SimThread& self) {
  SimThread* next = pick(block);
  if (next == &self) {
    self.state = ThreadState::running;
    return;
  }
  if (next != nullptr) {
    enter(*next);
    fiber_switch(self.context, next->context);
  } else {
    tls_thread = nullptr;
    fiber_switch(self.context, block.host);
  }
}

std::vector<uint32_t> threads_in(const Block& block, ThreadState state) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < block.threads_count; ++i)
    if (block.threads[i].state == state) out.push_back(i);
  return out;
}

// "lane 3", "lanes 0-15, 20".
std::string lane_list(unsigned mask) {
  const int count = std::popcount(mask);
  if (count == 0) return "no lanes";
  return (count == 1 ? "lane " : "lanes ") + lane_ranges(mask);
}

[[noreturn]] void thread_exit(Block& block, SimThread& self);

// The entry of every emulated thread: the kernel, then exit. An exception thrown by kernel code
// is captured here, on the thread's own fiber, and reported as a fault.
void fiber_main(void* arg) {
  fiber_started();
  SimThread& self = *static_cast<SimThread*>(arg);
  Block& block = *tls_block;
  std::optional<FaultRecord> thrown;
  try {
    block.launch->invoke(block.launch->params);
  } catch (FiberFault& f) {
    thrown = std::move(f.record);
  } catch (const std::exception& e) {
    thrown = FaultRecord{
        "exception", "thread " + thread_name(block, self.linear) + " threw: " + e.what(), {}};
  } catch (...) {
    thrown = FaultRecord{"exception",
                         "thread " + thread_name(block, self.linear) + " threw a non-std exception",
                         {}};
  }
  if (thrown) block_fault(std::exchange(*thrown, FaultRecord{}));
  thread_exit(*tls_block, *tls_thread);
}

// A thread returned from the kernel: the next runnable thread (or the host) takes over.
void thread_exit(Block& block, SimThread& self) {
  raise_undefined_behaviour(block);
  WarpState& warp = block.warps[warp_of(self.linear)];
  const unsigned bit = 1u << lane_of(self.linear);
  // A barrier or collective still waiting for this thread can never complete now; that shows
  // (with every thread's part in it) once the rest of the block can do no more: stalled().
  self.state = ThreadState::exited;
  warp.exited |= bit;
  ++block.exited;
  SimThread* next = pick(block);
  if (next != nullptr) {
    enter(*next);
    fiber_exit_to(self.context, next->context);
  }
  tls_thread = nullptr;
  fiber_exit_to(self.context, block.host);
}

// " waits at " / " wait at " for the lanes of a mask.
const char* waits(unsigned lanes) {
  return __builtin_popcount(lanes) == 1 ? " waits at " : " wait at ";
}

std::string count_of(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Every thread is blocked or exited and none can continue: names who waits where, and which
// rule was broken (an exited lane named by a collective, a barrier exited threads never reach).
FaultRecord stalled(const Block& block) {
  const std::vector<uint32_t> exited = threads_in(block, ThreadState::exited);
  for (size_t w = 0; w < block.warps.size(); ++w) {
    const WarpState& warp = block.warps[w];
    for (const PendingCollective& p : warp.pending) {
      if (p.mask == 0 || !(p.mask & warp.exited)) continue;
      return {"warp collective names an exited lane",
              lane_list(p.arrived) + " of warp " + std::to_string(w) + waits(p.arrived) + p.op +
                  " (" + site_name(p.site) + ") with mask " + fmt::format("{:#010x}", p.mask) +
                  " for " + lane_list(p.mask & ~p.arrived) + ", of which " +
                  lane_list(p.mask & warp.exited) + " exited",
              {}};
    }
  }
  std::map<std::pair<std::string, std::string>, std::vector<uint32_t>> at_barrier;
  for (uint32_t i = 0; i < block.threads_count; ++i) {
    const SimThread& t = block.threads[i];
    if (t.state == ThreadState::at_barrier)
      at_barrier[{t.wait_op, site_name(t.wait_site)}].push_back(i);
  }
  std::string waiting;
  size_t waiting_count = 0;
  for (const auto& [where, threads] : at_barrier) {
    if (!waiting.empty()) waiting += "; ";
    waiting += count_of(threads.size(), "thread", "threads") + " (" + thread_list(block, threads) +
               ") wait" + (threads.size() == 1 ? "s" : "") + " at " + where.first + " (" +
               where.second + ")";
    waiting_count += threads.size();
  }
  bool collectives = false;
  for (const WarpState& warp : block.warps)
    for (const PendingCollective& p : warp.pending) collectives |= p.mask != 0;
  if (waiting_count > 0 && !exited.empty() && !collectives) {
    return {"barrier not reached by every thread",
            waiting + ", but " + count_of(exited.size(), "thread", "threads") + " (" +
                thread_list(block, exited) + ") exited without reaching it",
            {}};
  }
  std::string details = "no thread can continue: " + waiting;
  for (size_t w = 0; w < block.warps.size(); ++w) {
    for (const PendingCollective& p : block.warps[w].pending) {
      if (p.mask == 0) continue;
      if (details.back() != ' ') details += "; ";
      details += lane_list(p.arrived) + " of warp " + std::to_string(w) + waits(p.arrived) + p.op +
                 " (" + site_name(p.site) + ") with mask " + fmt::format("{:#010x}", p.mask) +
                 " for " + lane_list(p.mask & ~p.arrived);
    }
  }
  if (!exited.empty())
    details += "; " + count_of(exited.size(), "thread", "threads") + " (" +
               thread_list(block, exited) + ") exited";
  return {"deadlock", details, {}};
}

// Shared between the host's end-of-block check and the barrier: a read of never-written shared
// memory that no other thread's write turned into a race before the interval ended.
FaultRecord uninit_fault(const Block& block, const UninitRead& read) {
  return {"uninitialised shared memory read",
          "thread " + thread_name(block, read.thread) + " reads " + byte_count(read.bytes) + " " +
              block.arena->describe(read.offset, read.bytes) +
              " at {pc0}, which no thread of the block had written",
          {read.pc}};
}

}  // namespace

void block_wait() {
  Block& block = *tls_block;
  raise_undefined_behaviour(block);
  switch_from(block, *tls_thread);
}

void block_yield() {
  Block& block = *tls_block;
  raise_undefined_behaviour(block);
  SimThread& self = *tls_thread;
  self.state = ThreadState::runnable;
  block.runnable.push_back(self.linear);
  switch_from(block, self);
}

void yield_thread() {
  if (tls_thread != nullptr) block_yield();
}

void block_wake(SimThread& thread) {
  thread.state = ThreadState::runnable;
  tls_block->runnable.push_back(thread.linear);
}

void block_fault(FaultRecord record) {
  Block* block = tls_block;
  SimThread* self = tls_thread;
  if (block == nullptr || self == nullptr)
    throw KernelFault("simt: " + record.kind + " outside an emulated kernel: " + record.details);
  if (!block->fault)
    block->fault = std::move(record);
  else
    record = FaultRecord{};  // frees it: this frame is never unwound
  tls_thread = nullptr;
  // The faulting fiber is never resumed; run_block forgets its stack.
  fiber_exit_to(self->context, block->host);
}

void block_interval_ended(Block& block) {
  if (block.uninit_read) block_fault(uninit_fault(block, *block.uninit_read));
}

void run_block(LaunchState& launch, uint64_t linear_block, uint3 block_index) {
  Worker& w = worker();
  Block& block = w.block;
  const uint32_t n = launch.block.x * launch.block.y * launch.block.z;
  w.stacks.reserve(n);
  block.stacks_lo = w.stacks.lo();
  block.stacks_hi = w.stacks.hi();
  block.launch = &launch;
  block.index = block_index;
  block.linear = linear_block;
  block.threads_count = n;
  if (block.threads.size() < n) block.threads.resize(n);
  block.runnable.clear();
  for (uint32_t i = 0; i < n; ++i) {
    SimThread& t = block.threads[i];
    t.linear = i;
    t.idx = uint3{i % launch.block.x, i / launch.block.x % launch.block.y,
                  i / (launch.block.x * launch.block.y)};
    t.state = ThreadState::runnable;
    t.wait_op = nullptr;
    t.wait_mask = 0;
    t.async_copies.clear();
    t.async_groups = 0;
    t.context.stack_lo = w.stacks.stack(i);
    t.context.stack_size = w.stacks.stack_bytes();
    fiber_prepare(t.context, fiber_main, &t);
    block.runnable.push_back(i);
  }
  block.exited = 0;
  block.barrier_arrived = 0;
  block.barrier_op = nullptr;
  block.epoch = 0;
  const uint32_t warps = (n + 31) / 32;
  block.warps.resize(warps);
  for (uint32_t wi = 0; wi < warps; ++wi) {
    WarpState& warp = block.warps[wi];
    const uint32_t lanes = std::min<uint32_t>(32, n - wi * 32);
    warp.lanes = lanes == 32 ? ~0u : (1u << lanes) - 1;
    warp.exited = 0;
    warp.at_barrier = 0;
    warp.pending.clear();
    warp.syncs.clear();
  }
  block.arena = &w.arena;
  block.uninit_read.reset();
  block.undefined_behaviour.reset();
  block.fault.reset();
  block.rng.state = launch.seed ^ (linear_block * 0xd1b54a32d192ed03ull);
  block.rng.next();
  blockIdx = block_index;
  blockDim = launch.block;
  gridDim = launch.grid;
  tls_block = &block;
  // Arena set-up may fault (too much dynamic shared memory): on the host, so it throws.
  w.arena.begin_block(block, launch.dynamic_smem);

  SimThread* first = pick(block);
  enter(*first);
  fiber_switch(block.host, first->context);
  // Back on the host: every thread exited, or none can continue, or one faulted.
  tls_thread = nullptr;
  tls_block = nullptr;
  if (!block.fault && block.exited != n) block.fault = stalled(block);
  if (!block.fault && block.uninit_read) block.fault = uninit_fault(block, *block.uninit_read);
  if (block.fault) {
    for (uint32_t i = 0; i < n; ++i)
      if (block.threads[i].state != ThreadState::exited)
        fiber_forget_stack(block.threads[i].context);
    FaultRecord record = std::move(*block.fault);
    block.fault.reset();
    throw KernelFault(fault_message(launch, block_index, record));
  }
}

// ---- the block barrier -------------------------------------------------------------------------

namespace {

int barrier_arrive(BarrierKind kind, int vote, const char* op, const std::source_location& site) {
  Block* block_ptr = tls_block;
  SimThread* self_ptr = tls_thread;
  if (block_ptr == nullptr || self_ptr == nullptr)
    throw KernelFault(std::string("simt: ") + op + " called outside an emulated kernel");
  Block& block = *block_ptr;
  SimThread& self = *self_ptr;
  WarpState& warp = block.warps[warp_of(self.linear)];
  const unsigned bit = 1u << lane_of(self.linear);
  // A barrier that exited threads never reach, or one some lanes' collective keeps them from,
  // never completes: reported when the block stalls (stalled()), with every thread's place.
  if (block.barrier_arrived == 0) {
    block.barrier_site = site;
    block.barrier_op = op;
    block.barrier_kind = kind;
    block.barrier_votes = 0;
    block.barrier_diverged = false;
  } else if (!same_site(site, block.barrier_site) || std::string_view(op) != block.barrier_op) {
    block.barrier_diverged = true;  // reported when the last thread arrives
  }
  block.barrier_votes += vote != 0 ? 1 : 0;
  if (++block.barrier_arrived == block.threads_count) {
    if (block.barrier_diverged) {
      block_fault([&] {
        std::map<std::pair<std::string, std::string>, std::vector<uint32_t>> sites;
        sites[{op, site_name(site)}].push_back(self.linear);
        for (uint32_t i = 0; i < block.threads_count; ++i) {
          const SimThread& t = block.threads[i];
          if (t.state == ThreadState::at_barrier)
            sites[{t.wait_op, site_name(t.wait_site)}].push_back(i);
        }
        std::string details;
        for (const auto& [where, threads] : sites) {
          if (!details.empty()) details += "; ";
          details += count_of(threads.size(), "thread", "threads") + " (" +
                     thread_list(block, threads) + ") at " + where.first + " (" + where.second +
                     ")";
        }
        return FaultRecord{"barrier divergence",
                           details + ": every thread of the block must reach the same barrier",
                           {}};
      }());
    }
    switch (block.barrier_kind) {
      case BarrierKind::plain:
        block.barrier_result = 0;
        break;
      case BarrierKind::count:
        block.barrier_result = block.barrier_votes;
        break;
      case BarrierKind::all:
        block.barrier_result = block.barrier_votes == static_cast<int>(block.threads_count) ? 1 : 0;
        break;
      case BarrierKind::any:
        block.barrier_result = block.barrier_votes > 0 ? 1 : 0;
        break;
    }
    block.barrier_arrived = 0;
    ++block.epoch;
    for (uint32_t i = 0; i < block.threads_count; ++i)
      if (block.threads[i].state == ThreadState::at_barrier) block_wake(block.threads[i]);
    for (WarpState& w : block.warps) w.at_barrier = 0;
    block_interval_ended(block);
    return block.barrier_result;
  }
  self.state = ThreadState::at_barrier;
  self.wait_site = site;
  self.wait_op = op;
  warp.at_barrier |= bit;
  block_wait();
  // Safe to read: the next barrier instance cannot complete before this thread reaches it.
  return block.barrier_result;
}

}  // namespace
}  // namespace braid::simt

void __syncthreads(std::source_location site) {
  braid::simt::barrier_arrive(braid::simt::BarrierKind::plain, 0, "__syncthreads", site);
}
int __syncthreads_count(int predicate, std::source_location site) {
  return braid::simt::barrier_arrive(braid::simt::BarrierKind::count, predicate,
                                     "__syncthreads_count", site);
}
int __syncthreads_and(int predicate, std::source_location site) {
  return braid::simt::barrier_arrive(braid::simt::BarrierKind::all, predicate, "__syncthreads_and",
                                     site);
}
int __syncthreads_or(int predicate, std::source_location site) {
  return braid::simt::barrier_arrive(braid::simt::BarrierKind::any, predicate, "__syncthreads_or",
                                     site);
}
