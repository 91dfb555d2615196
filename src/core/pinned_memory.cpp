// Pinned host memory: the backends' registered allocators behind a cpu Storage, and counters.
#include "braid/core/pinned_memory.h"

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "braid/core/error.h"

namespace braid {
namespace {

PinnedMemoryOps g_ops[kNumDeviceKinds];
std::atomic<int64_t> g_current{0}, g_peak{0}, g_count{0};

// The live pinned blocks, for is_pinned (a Storage's release function cannot be compared).
std::mutex g_live_mutex;
std::unordered_set<const void*>& live_blocks() {
  static auto* live = new std::unordered_set<const void*>();  // storages may outlive statics
  return *live;
}

}  // namespace

void register_pinned_memory(DeviceKind kind, PinnedMemoryOps ops) {
  g_ops[static_cast<int>(kind)] = ops;
}

bool has_pinned_memory(DeviceKind kind) {
  return g_ops[static_cast<int>(kind)].allocate != nullptr;
}

StoragePtr pinned_storage(size_t bytes, Device for_device) {
  if (for_device.is_cpu()) return std::make_shared<Storage>(bytes, Device::cpu());
  const PinnedMemoryOps ops = g_ops[static_cast<int>(for_device.kind)];
  BRAID_CHECK(ops.allocate != nullptr && ops.release != nullptr,
              "no pinned host memory for {}: this braid was built without its backend "
              "(configure with -DBRAID_CUDA=ON on a machine with nvcc)",
              for_device.str());
  if (bytes == 0) return std::make_shared<Storage>(nullptr, 0, Device::cpu(), nullptr);
  void* data = ops.allocate(bytes);
  {
    std::lock_guard lock(g_live_mutex);
    live_blocks().insert(data);
  }
  const int64_t now =
      g_current.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  g_count.fetch_add(1);
  return std::make_shared<Storage>(data, bytes, Device::cpu(),
                                   [release = ops.release, bytes](void* p) {
                                     {
                                       std::lock_guard lock(g_live_mutex);
                                       live_blocks().erase(p);
                                     }
                                     g_current.fetch_sub(static_cast<int64_t>(bytes));
                                     release(p);
                                   });
}

Tensor pinned_empty(const Shape& shape, DType dtype, Device for_device) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor::from_storage(pinned_storage(bytes, for_device), shape, dtype);
}

bool is_pinned(const Storage& storage) {
  if (storage.data() == nullptr) return false;
  std::lock_guard lock(g_live_mutex);
  return live_blocks().count(storage.data()) != 0;
}

PinnedMemoryStats pinned_memory_stats() {
  return {g_current.load(), g_peak.load(), g_count.load()};
}

}  // namespace braid
