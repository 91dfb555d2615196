// The (op, device) -> kernel table. Ops look kernels up here; backends register into it.
//
// Each kernel has a signature type (see kernel_signatures.h) so a registration with the
// wrong function type does not compile. A missing entry throws "device cuda lacks op X".
#pragma once

#include <array>
#include <string_view>
#include <unordered_map>

#include "braid/core/device.h"
#include "braid/core/error.h"

namespace braid::ops {

class KernelRegistry {
 public:
  // The process-wide table, filled with every compiled backend on first use.
  static KernelRegistry& instance();

  template <class Sig>
  void add(DeviceKind device, typename Sig::Fn fn) {
    table_[std::string_view(Sig::kName)][static_cast<int>(device)] = reinterpret_cast<void*>(fn);
  }

  template <class Sig>
  typename Sig::Fn get(DeviceKind device) const {
    return reinterpret_cast<typename Sig::Fn>(find(Sig::kName, device));
  }

  bool has(std::string_view op, DeviceKind device) const;

 private:
  KernelRegistry() = default;
  void* find(std::string_view op, DeviceKind device) const;
  std::unordered_map<std::string_view, std::array<void*, kNumDeviceKinds>> table_;
};

template <class Sig>
typename Sig::Fn kernel(Device device) {
  return KernelRegistry::instance().get<Sig>(device.kind);
}

// Filled by src/ops/cpu/register_cpu_kernels.cpp and, in CUDA builds, kernels/register.cu.
void register_cpu_kernels(KernelRegistry& registry);
void register_cuda_kernels(KernelRegistry& registry);

}  // namespace braid::ops
