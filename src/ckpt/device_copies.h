// Copies of device-resident checkpoint state into pinned host memory, by DMA on the device's
// copy stream, ordered after the compute stream's work by events (braid/core/stream.h).
#pragma once

#include <memory>
#include <vector>

#include "braid/core/stream.h"
#include "braid/core/tensor.h"

namespace braid::ckpt {

// One dense device tensor and the host memory it is copied into (pinned, at least its bytes).
struct DeviceToHost {
  void* host = nullptr;
  Tensor source;
};

// Enqueues `copies` (all from `device`) on its copy stream after every piece of work the compute
// stream has been given so far (which produced the sources), and returns the event that marks
// their end: the host memory may be read once it completed. Returns without waiting for the
// device. The sources must stay unchanged until then: with `compute_waits` the compute stream
// waits for the event at once (its later work may overwrite them); otherwise the caller makes it
// wait before the first work that writes a source. Sources allocated on the compute stream are
// kept from reuse until the copies are done (record_stream), whoever drops them first.
std::shared_ptr<Event> copy_to_host(Device device, const std::vector<DeviceToHost>& copies,
                                    bool compute_waits);

// The one device of `tensors` that is not the CPU; the CPU when all are host tensors. Throws when
// they span two devices (a rank's checkpoint state lives on one).
Device device_of(const std::vector<Tensor>& tensors, const char* what);

}  // namespace braid::ckpt
