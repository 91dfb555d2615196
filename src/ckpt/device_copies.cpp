// copy_to_host: the checkpoint's device-to-host DMA on the copy stream, between two events.
#include "device_copies.h"

#include "braid/core/error.h"

namespace braid::ckpt {

std::shared_ptr<Event> copy_to_host(Device device, const std::vector<DeviceToHost>& copies,
                                    bool compute_waits) {
  BRAID_CHECK(!device.is_cpu(), "copy_to_host copies off a device, not off the CPU");
  const Stream compute = Stream::compute(device), copy = Stream::copy(device);
  Event produced;
  produced.record(compute);
  copy.wait(produced);
  for (const DeviceToHost& c : copies) {
    BRAID_CHECK(c.source.device() == device && c.source.is_contiguous(),
                "checkpoint copy of {} off {}: the source must be dense on that device",
                c.source.str(), device.str());
    copy_async(c.host, Device::cpu(), c.source.data_ptr(), device, c.source.nbytes(), copy);
    record_stream(*c.source.storage(), copy);
  }
  auto done = std::make_shared<Event>();
  done->record(copy);
  if (compute_waits) compute.wait(*done);
  return done;
}

Device device_of(const std::vector<Tensor>& tensors, const char* what) {
  Device found = Device::cpu();
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.device().is_cpu()) continue;
    BRAID_CHECK(found.is_cpu() || found == t.device(),
                "{} lives on {} and on {}: a rank's checkpoint state must live on one device "
                "(or on the host)",
                what, found.str(), t.device().str());
    found = t.device();
  }
  return found;
}

}  // namespace braid::ckpt
