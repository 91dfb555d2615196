// Storage: owns host memory from the counted allocator, or wraps foreign memory with a release.
#include "braid/core/storage.h"

#include "braid/core/allocator.h"
#include "braid/core/error.h"

namespace braid {

std::string Device::str() const {
  return is_cpu() ? "cpu" : fmt::format("cuda:{}", index);
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (device.is_cpu()) {
    data_ = host_allocate(bytes);
  } else {
    const DeviceMemoryOps& ops = device_memory(device.kind);
    data_ = bytes ? ops.allocate(bytes, device.index) : nullptr;
    release_ = [ops, index = device.index](void* p) {
      if (p) ops.release(p, index);
    };
  }
}

Storage::Storage(void* data, size_t bytes, Device device, std::function<void(void*)> release)
    : data_(data), bytes_(bytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_(data_);
  } else if (device_.is_cpu()) {
    host_free(data_, bytes_);
  }
}

}  // namespace braid
