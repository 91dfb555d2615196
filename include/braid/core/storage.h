// A refcounted block of memory on one device; tensors are views onto a Storage.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "braid/core/device.h"

namespace braid {

class Storage {
 public:
  // Allocates `bytes` on `device` (host memory through the counted allocator).
  Storage(size_t bytes, Device device);
  // Wraps memory owned elsewhere (an mmap'ed file, a CUDA buffer); `release` frees it.
  Storage(void* data, size_t bytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  std::function<void(void*)> release_;
};

using StoragePtr = std::shared_ptr<Storage>;

}  // namespace braid
