// Host allocator: aligned_alloc plus atomic counters for current and peak bytes.
#include "braid/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "braid/core/error.h"

namespace braid {
namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_count{0};

}  // namespace

void* host_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  BRAID_CHECK(p != nullptr, "out of host memory allocating {} bytes ({} live)", bytes,
              g_current.load());
  const int64_t now = g_current.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  g_count.fetch_add(1);
  return p;
}

void host_free(void* ptr, size_t bytes) {
  if (!ptr) return;
  std::free(ptr);
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
              "no memory backend for device kind {}: this braid was built without CUDA "
              "(configure with -DBRAID_CUDA=ON on a machine with nvcc)",
              static_cast<int>(kind));
  return ops;
}

MemoryStats host_memory_stats() { return {g_current.load(), g_peak.load(), g_count.load()}; }

void reset_host_peak() { g_peak.store(g_current.load()); }

}  // namespace braid
