// The (op, device) -> kernel table. Ops look kernels up here; backends register into it.
//
// Each kernel has a signature type (see kernel_signatures.h) so a registration with the
// wrong function type does not compile. A missing entry throws "device cuda lacks op X".
#pragma once

#include <array>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "braid/core/device.h"
#include "braid/core/device_trace.h"
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

// A kernel of the table bound to the device it runs on. While a trace records, a call on a
// device is a device span named after the kernel on the device's compute stream (the stream
// every kernel runs on), so the trace shows what the device ran and for how long.
template <class Sig, class Fn = typename Sig::Fn>
class KernelCall;

template <class Sig, class... Args>
class KernelCall<Sig, void (*)(Args...)> {
 public:
  KernelCall(void (*fn)(Args...), Device device) : fn_(fn), device_(device) {}
  void operator()(Args... args) const {
    if (!trace::enabled() || device_.is_cpu()) return fn_(std::forward<Args>(args)...);
    trace::DeviceSpan span(Stream::compute(device_), "kernel", Sig::kName);
    fn_(std::forward<Args>(args)...);
  }

 private:
  void (*fn_)(Args...);
  Device device_;
};

template <class Sig>
KernelCall<Sig> kernel(Device device) {
  return KernelCall<Sig>(KernelRegistry::instance().get<Sig>(device.kind), device);
}

// Filled by src/ops/cpu/register_cpu_kernels.cpp and, in CUDA builds, kernels/register.cu.
void register_cpu_kernels(KernelRegistry& registry);
void register_cuda_kernels(KernelRegistry& registry);

}  // namespace braid::ops
