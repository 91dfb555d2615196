// Warp collectives (warp.h): lanes named by a mask meet at one call, every mismatch (an exited,
// missing or elsewhere-waiting lane, another mask or call site) is a fault; and the shuffles,
// votes and __syncwarp built on them (builtins_warp.h).
#include "warp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "block.h"
#include "builtins_warp.h"
#include "checker.h"
#include "fault.h"

namespace braid::simt {

std::string lane_ranges(unsigned mask) {
  std::string out;
  for (int l = 0; l < 32;) {
    if (!(mask >> l & 1u)) {
      ++l;
      continue;
    }
    int e = l;
    while (e + 1 < 32 && (mask >> (e + 1) & 1u)) ++e;
    if (!out.empty()) out += ", ";
    out += std::to_string(l);
    if (e > l) out += "-" + std::to_string(e);
    l = e + 1;
  }
  return out.empty() ? "none" : out;
}

namespace {

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

bool same_op(const char* a, const char* b) {
  return a == b || std::strcmp(a, b) == 0;
}

// Copies of the usual 4- and 8-byte lane values as plain moves: memcpy with a run-time size is a
// library call (and, under the sanitizers, an intercepted one) on every lane of every exchange.
void copy_bytes(void* dst, const void* src, size_t bytes) {
  switch (bytes) {
    case 4:
      *static_cast<uint32_t*>(dst) = *static_cast<const uint32_t*>(src);
      return;
    case 8:
      *static_cast<uint64_t*>(dst) = *static_cast<const uint64_t*>(src);
      return;
    default:
      std::memcpy(dst, src, bytes);
  }
}

// The running thread, or a KernelFault when a collective is called from host code.
SimThread& self_or_throw(const char* op) {
  if (tls_thread == nullptr)
    throw KernelFault(std::string("simt: ") + op + " called outside an emulated kernel");
  return *tls_thread;
}

std::string mask_text(unsigned mask) {
  return fmt::format("{:#010x}", mask);
}

// The fault for a lane calling `op` at `site` with `mask` in a way that can never complete.
[[noreturn]] void mask_fault(const Block& block, const SimThread& self, unsigned mask,
                             const char* op, const std::source_location& site, const char* problem,
                             unsigned lanes, const char* more,
                             const char* kind = "warp collective mask error") {
  block_fault([&] {
    return FaultRecord{kind,
                       fmt::format("lane {} (thread {}) of warp {} calls {} at {} with mask {}, "
                                   "{}{}{}",
                                   lane_of(self.linear), thread_name(block, self.linear),
                                   warp_of(self.linear), op, site_name(site), mask_text(mask),
                                   problem, lanes == 0 ? "" : " " + lane_ranges(lanes), more),
                       {}};
  }());
}

}  // namespace

int lane_id() {
  return lane_of(self_or_throw("lane_id").linear);
}
int warp_id() {
  return warp_of(self_or_throw("warp_id").linear);
}

namespace {

// `sync`: a __syncwarp, which (the programming guide says) waits for the lanes of the mask at any
// __syncwarp, and whose completion orders their memory accesses (recorded for the checker).
void exchange(unsigned mask, const void* value, size_t bytes, void* out, const char* op,
              const std::source_location& site, bool sync) {
  SimThread& self = self_or_throw(op);
  Block& block = *tls_block;
  WarpState& warp = block.warps[warp_of(self.linear)];
  const int lane = lane_of(self.linear);
  const unsigned bit = 1u << lane;
  if (!(mask & bit)) mask_fault(block, self, mask, op, site, "which omits the caller", 0, "");
  if (mask & ~warp.lanes)
    mask_fault(block, self, mask, op, site,
               "which names lanes that do not exist in this block:", mask & ~warp.lanes,
               " (a partial last warp)");
  // Lanes of the mask that exited, or wait at the block barrier, can never join: reported when the
  // block stalls (scheduler.cpp), with every lane's place.
  PendingCollective* join = nullptr;
  PendingCollective* free_slot = nullptr;
  for (PendingCollective& p : warp.pending) {
    if (p.mask == 0) {
      if (free_slot == nullptr) free_slot = &p;
      continue;
    }
    if (p.mask == mask && same_op(p.op, op) && (sync || same_site(p.site, site)) &&
        p.bytes == bytes && !(p.arrived & bit)) {
      join = &p;
      break;
    }
    // Lanes already waiting in `p` that this call also needs cannot leave `p` without this lane,
    // which will not reach `p` before this call completes: they can never meet.
    if ((p.mask & bit) && (p.arrived & mask)) {
      block_fault([&] {
        return FaultRecord{
            "warp collective mask error",
            fmt::format("lane {} (thread {}) of warp {} calls {} at {} with mask {}, but lanes "
                        "{} wait for it at {} ({}) with mask {}: every lane of a mask must "
                        "make the same call with the same mask",
                        lane, thread_name(block, self.linear), warp_of(self.linear), op,
                        site_name(site), mask_text(mask), lane_ranges(p.arrived & mask), p.op,
                        site_name(p.site), mask_text(p.mask)),
            {}};
      }());
    }
  }
  if (join == nullptr) {
    if (free_slot == nullptr) {
      warp.pending.emplace_back();
      free_slot = &warp.pending.back();
    }
    join = free_slot;
    join->mask = mask;
    join->op = op;
    join->site = site;
    join->bytes = bytes;
    join->arrived = 0;
    join->values.assign(32 * bytes, 0);
  }
  if (bytes > 0) copy_bytes(join->values.data() + lane * bytes, value, bytes);
  join->outs[lane] = out;
  join->arrived |= bit;
  if (join->arrived != mask) {
    self.state = ThreadState::at_warp;
    self.wait_site = site;
    self.wait_op = op;
    self.wait_mask = mask;
    block_wait();
    return;  // the lane that completed the exchange filled `out`
  }
  // Complete: every participant sees every lane's contribution.
  if (sync) warp.syncs.push_back(mask);
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    if (bytes == 4) {
      std::copy_n(reinterpret_cast<const uint32_t*>(join->values.data()), 32,
                  static_cast<uint32_t*>(join->outs[l]));
    } else if (bytes > 0) {
      std::memcpy(join->outs[l], join->values.data(), 32 * bytes);
    }
    if (l != lane) block_wake(block.threads[warp_of(self.linear) * 32 + l]);
  }
  join->mask = 0;  // the slot is free again
}

}  // namespace

void warp_exchange(unsigned mask, const void* value, size_t bytes, void* out, const char* op,
                   const std::source_location& site) {
  exchange(mask, value, bytes, out, op, site, false);
}

namespace {

// The value every lane of the exchange returns is taken from lane `source` (PTX's shfl.sync
// rules); reading a lane outside the mask is undefined on the device, hence a fault.
[[noreturn]] void source_fault(const Block& block, const SimThread& self, unsigned mask, int source,
                               const char* op, const std::source_location& site) {
  block_fault([&] {
    return FaultRecord{
        "warp collective mask error",
        fmt::format("lane {} (thread {}) of warp {} reads lane {} in {} at {}, "
                    "which is not in mask {} (the value is undefined)",
                    lane_of(self.linear), thread_name(block, self.linear), warp_of(self.linear),
                    source, op, site_name(site), mask_text(mask)),
        {}};
  }());
}

}  // namespace

void shuffle_bytes(unsigned mask, const void* value, void* result, size_t bytes, ShuffleMode mode,
                   unsigned lane_arg, int width, const char* op, const std::source_location& site) {
  SimThread& self = self_or_throw(op);
  Block& block = *tls_block;
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    block_fault([&] {
      return FaultRecord{"invalid warp collective",
                         fmt::format("thread {} calls {} at {} with width {}: it must be a "
                                     "power of 2 from 1 to 32",
                                     thread_name(block, self.linear), op, site_name(site), width),
                         {}};
    }());
  }
  alignas(16) unsigned char all[32 * 16];
  warp_exchange(mask, value, bytes, all, op, site);
  // PTX ISA, shfl.sync: segmask selects the lane's width-sized segment, the clamp its end.
  const int lane = lane_of(self.linear);
  const int segmask = (32 - width) & 31;
  const int clamp = mode == ShuffleMode::up ? 0 : 31;
  const int b = static_cast<int>(lane_arg & 31u);
  const int max_lane = (lane & segmask) | (clamp & ~segmask);
  const int min_lane = lane & segmask;
  int j = lane;
  bool in_range = false;
  switch (mode) {
    case ShuffleMode::idx:
      j = min_lane | (b & ~segmask);
      in_range = j <= max_lane;
      break;
    case ShuffleMode::up:
      j = lane - b;
      in_range = j >= max_lane;
      break;
    case ShuffleMode::down:
      j = lane + b;
      in_range = j <= max_lane;
      break;
    case ShuffleMode::bfly:
      j = lane ^ b;
      in_range = j <= max_lane;
      break;
  }
  if (!in_range) j = lane;
  if (!(mask >> j & 1u)) source_fault(block, self, mask, j, op, site);
  copy_bytes(result, all + j * bytes, bytes);
}

unsigned vote_ballot(unsigned mask, int predicate, const char* op,
                     const std::source_location& site) {
  int all[32];
  const int mine = predicate != 0 ? 1 : 0;
  warp_exchange(mask, &mine, sizeof mine, all, op, site);
  unsigned ballot = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && all[l] != 0) ballot |= 1u << l;
  return ballot;
}

unsigned match_any(unsigned mask, const void* value, size_t bytes, const char* op,
                   const std::source_location& site, bool* all_equal) {
  alignas(16) unsigned char all[32 * 8];
  warp_exchange(mask, value, bytes, all, op, site);
  unsigned same = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && std::memcmp(all + l * bytes, value, bytes) == 0) same |= 1u << l;
  if (all_equal != nullptr) *all_equal = same == mask;
  return same;
}

long long reduce_sync(unsigned mask, long long value, ReduceOp reduce, const char* op,
                      const std::source_location& site) {
  long long all[32];
  warp_exchange(mask, &value, sizeof value, all, op, site);
  bool first = true;
  long long acc = 0;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    const long long v = all[l];
    if (first) {
      acc = v;
      first = false;
      continue;
    }
    switch (reduce) {
      case ReduceOp::add:
        acc = static_cast<long long>(static_cast<unsigned long long>(acc) +
                                     static_cast<unsigned long long>(v));
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::bit_and:
        acc &= v;
        break;
      case ReduceOp::bit_or:
        acc |= v;
        break;
      case ReduceOp::bit_xor:
        acc ^= v;
        break;
    }
  }
  return acc;
}

void syncwarp(unsigned mask, const std::source_location& site) {
  exchange(mask, nullptr, 0, nullptr, "__syncwarp", site, true);
}

unsigned active_mask() {
  SimThread& self = self_or_throw("__activemask");
  const WarpState& warp = tls_block->warps[warp_of(self.linear)];
  return warp.lanes & ~warp.exited;
}

}  // namespace braid::simt
