// Where a tensor's memory lives: the host, or one CUDA device.
#pragma once

#include <string>

namespace braid {

enum class DeviceKind : uint8_t { cpu = 0, cuda = 1 };
inline constexpr int kNumDeviceKinds = 2;

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

}  // namespace braid
