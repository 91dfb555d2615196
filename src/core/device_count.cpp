// The registered device counters.
#include "braid/core/device_count.h"

#include <atomic>

namespace braid {
namespace {

std::atomic<int (*)()> g_count[kNumDeviceKinds] = {};

}  // namespace

void register_device_count(DeviceKind kind, int (*count)()) {
  g_count[static_cast<int>(kind)].store(count);
}

bool device_kind_compiled(DeviceKind kind) {
  return kind == DeviceKind::cpu || g_count[static_cast<int>(kind)].load() != nullptr;
}

int device_count(DeviceKind kind) {
  if (kind == DeviceKind::cpu) return 1;
  int (*count)() = g_count[static_cast<int>(kind)].load();
  return count ? count() : 0;
}

}  // namespace braid
