// How many devices of a kind this process sees, asked through the backend that registered a
// counter (the CUDA backend does, at its registration), so core never links against it.
#pragma once

#include "braid/core/device.h"

namespace braid {

// `count` must never throw and returns 0 without a device or driver.
void register_device_count(DeviceKind kind, int (*count)());
// True when a backend for `kind` is compiled in and registered its counter (the CPU always is).
bool device_kind_compiled(DeviceKind kind);
// Visible devices of `kind`: 1 for the CPU, 0 when the backend is missing or sees none.
int device_count(DeviceKind kind);

}  // namespace braid
