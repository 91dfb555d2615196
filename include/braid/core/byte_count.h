// Byte counts as people read them in messages and tables: "512 B", "1.50 GiB".
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace braid {

inline std::string format_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace braid
