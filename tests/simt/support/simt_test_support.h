// Helpers for the emulator core's tests: device buffers filled and read from the host (inside a
// DeviceAccess, as the runtime's copies are), and catching a launch's KernelFault.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "simt/device_memory.h"
#include "simt/fault.h"

namespace braid::simt::testing {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    data_ = static_cast<T*>(device_allocate(sizeof(T) * count));
    if (data_ == nullptr) throw Error("test: device_allocate failed");
  }
  DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(values.size()) { upload(values); }
  ~DeviceBuffer() { device_free(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }

  // As a host-to-device copy: the bytes and their initialisation.
  void upload(const std::vector<T>& values) {
    DeviceAccess access;
    std::memcpy(static_cast<void*>(data_), values.data(), sizeof(T) * values.size());
    mark_initialized(data_, sizeof(T) * values.size());
  }
  void fill(const T& value) { upload(std::vector<T>(count_, value)); }
  std::vector<T> download() const {
    DeviceAccess access;
    std::vector<T> out(count_);
    std::memcpy(out.data(), static_cast<const void*>(data_), sizeof(T) * count_);
    return out;
  }

 private:
  size_t count_;
  T* data_ = nullptr;
};

// The KernelFault message `launch` throws, or "" when it completes. BRAID_SIMT_PRINT_FAULTS=1
// prints each message (to read them while writing a test).
inline std::string fault_of(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const KernelFault& e) {
    if (std::getenv("BRAID_SIMT_PRINT_FAULTS") != nullptr) std::fprintf(stderr, "%s\n", e.what());
    return e.what();
  }
  return "";
}

}  // namespace braid::simt::testing

// The fault names its kind and the kernel; prints the message on failure.
#define EXPECT_FAULT(message, kind, kernel)                                                 \
  do {                                                                                      \
    const std::string braid_message_ = (message);                                           \
    EXPECT_NE(braid_message_.find(kind), std::string::npos) << braid_message_;              \
    EXPECT_NE(braid_message_.find(std::string("in kernel ") + (kernel)), std::string::npos) \
        << braid_message_;                                                                  \
  } while (0)
