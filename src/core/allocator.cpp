// Host allocator: aligned blocks (huge pages for large ones), a cache of large freed blocks,
// live and peak byte counters.
//
// Training allocates the same large buffers (logits, their gradient, activations) every step.
// Handing them back to the OS and faulting fresh zeroed pages in again cost ~10% of a small
// model's step, so freed blocks of at least kCacheMinBytes are kept, by exact rounded size,
// up to a cap (BRAID_HOST_CACHE_MB, default 4096), and reused.
#include "braid/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include <sys/mman.h>

#include "braid/core/error.h"

namespace braid {
namespace {

constexpr size_t kCacheMinBytes = size_t{1} << 18;
constexpr size_t kCacheGranule = size_t{1} << 16;  // large sizes rounded to 64 KiB
constexpr size_t kPageBytes = size_t{4} << 10;
constexpr size_t kPageAlignMinBytes = size_t{64} << 10;
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugeMinBytes = size_t{4} << 20;

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_count{0};

class BlockCache {
 public:
  void* take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(rounded);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    cached_bytes_ -= rounded;
    return p;
  }
  // Keeps the block if the cache has room; returns false when the caller must free it.
  bool give(void* p, size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_bytes_ + rounded > limit_) return false;
    free_.emplace(rounded, p);
    cached_bytes_ += rounded;
    return true;
  }

 private:
  static size_t limit_from_env() {
    const char* mb = std::getenv("BRAID_HOST_CACHE_MB");
    return (mb ? std::strtoull(mb, nullptr, 10) : 4096ull) << 20;
  }
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t cached_bytes_ = 0;
  size_t limit_ = limit_from_env();
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: tensors may outlive statics
  return *c;
}

// A new block from the C library. Blocks of kHugeMinBytes and more start on a 2 MiB boundary
// and ask for transparent huge pages (this kernel's THP mode is "madvise": without the advice
// every tensor lives on 4 KiB pages). Weights, gradients and optimizer moments are streamed
// whole every step, by OpenBLAS packing its operands, by AdamW and by zero_grad, and with 4 KiB
// pages every page of those streams costs a TLB miss, which huge pages take off AdamW's time
// over 124M parameters (braid_micro_bench's BM_AdamW).
//
// Blocks of kPageAlignMinBytes and more start on a 4 KiB page boundary, so that a checkpoint
// snapshot image below kHugeMinBytes can still go to the disk in place with direct I/O,
// which wants aligned addresses (src/ckpt/snapshot_image.h).
void* fresh_block(size_t rounded) {
  if (rounded < kPageAlignMinBytes) return std::aligned_alloc(kHostAlignment, rounded);
  void* p = nullptr;
  if (posix_memalign(&p, rounded < kHugeMinBytes ? kPageBytes : kHugePageBytes, rounded) != 0)
    return nullptr;
  if (rounded < kHugeMinBytes) return p;
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice: where it fails, the block keeps 4 KiB pages
#endif
  return p;
}

size_t round_size(size_t bytes) {
  const size_t granule = bytes >= kCacheMinBytes ? kCacheGranule : kHostAlignment;
  return (bytes + granule - 1) / granule * granule;
}

}  // namespace

void* host_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = round_size(bytes);
  void* p = rounded >= kCacheMinBytes ? cache().take(rounded) : nullptr;
  if (!p) p = fresh_block(rounded);
  BRAID_CHECK(p != nullptr, "out of host memory allocating {} bytes ({} live)", bytes,
              g_current.load());
  const int64_t now =
      g_current.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  g_count.fetch_add(1);
  return p;
}

void host_free(void* ptr, size_t bytes) {
  if (!ptr) return;
  const size_t rounded = round_size(bytes);
  if (rounded < kCacheMinBytes || !cache().give(ptr, rounded)) std::free(ptr);
  g_current.fetch_sub(static_cast<int64_t>(bytes));
}

namespace {
DeviceMemoryOps g_device_memory[kNumDeviceKinds];
}

void register_device_memory(DeviceKind kind, DeviceMemoryOps ops) {
  g_device_memory[static_cast<int>(kind)] = ops;
}

const DeviceMemoryOps& device_memory(DeviceKind kind) {
  const DeviceMemoryOps& ops = g_device_memory[static_cast<int>(kind)];
  BRAID_CHECK(ops.allocate != nullptr,
              "no memory backend for {} tensors: this braid was built without CUDA "
              "(configure with -DBRAID_CUDA=ON on a machine with nvcc)",
              Device{kind, 0}.str());
  return ops;
}

DeviceMemoryStats device_memory_stats(Device device) {
  if (device.is_cpu()) {
    const MemoryStats host = host_memory_stats();
    DeviceMemoryStats stats;
    stats.allocated_bytes = stats.requested_bytes = stats.reserved_bytes = host.current_bytes;
    stats.peak_allocated_bytes = stats.peak_reserved_bytes = host.peak_bytes;
    stats.device_mallocs = host.allocations;
    return stats;
  }
  const DeviceMemoryOps& ops = device_memory(device.kind);
  return ops.stats ? ops.stats(device.index) : DeviceMemoryStats{};
}

DeviceMemoryInfo device_memory_info(Device device) {
  if (device.is_cpu()) return {};
  const DeviceMemoryOps& ops = device_memory(device.kind);
  if (!ops.memory_info) return {};
  size_t free = 0, total = 0;
  ops.memory_info(device.index, &free, &total);
  return {static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

void empty_device_cache(Device device) {
  if (device.is_cpu()) return;
  const DeviceMemoryOps& ops = device_memory(device.kind);
  if (ops.empty_cache) ops.empty_cache(device.index);
}

void reset_device_peak(Device device) {
  if (device.is_cpu()) {
    reset_host_peak();
    return;
  }
  const DeviceMemoryOps& ops = device_memory(device.kind);
  if (ops.reset_peak) ops.reset_peak(device.index);
}

MemoryStats host_memory_stats() {
  return {g_current.load(), g_peak.load(), g_count.load()};
}

void reset_host_peak() {
  g_peak.store(g_current.load());
}

}  // namespace braid
