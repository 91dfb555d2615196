// The kernel table: filled once with every compiled backend, then read-only.
#include "braid/ops/kernel_registry.h"

#include <string>

namespace braid::ops {

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    register_cpu_kernels(*r);
#ifdef BRAID_WITH_CUDA
    register_cuda_kernels(*r);
#endif
    return r;
  }();
  return *registry;
}

bool KernelRegistry::has(std::string_view op, DeviceKind device) const {
  auto it = table_.find(op);
  return it != table_.end() && it->second[static_cast<int>(device)] != nullptr;
}

void* KernelRegistry::find(std::string_view op, DeviceKind device) const {
  auto it = table_.find(op);
  void* fn = it == table_.end() ? nullptr : it->second[static_cast<int>(device)];
  BRAID_CHECK(fn != nullptr, "device {} lacks op {}", device == DeviceKind::cpu ? "cpu" : "cuda",
              op);
  return fn;
}

}  // namespace braid::ops
