// Helpers of the emulated runtime's tests: device buffers, host round trips, and the death
// predicate for a host touch of device memory.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <vector>

#include "simt/emulated_device.h"

namespace braid::simt::testing {

// A cudaMalloc'd buffer freed at scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr_, bytes), cudaSuccess); }
  ~DeviceBuffer() { EXPECT_EQ(cudaFree(ptr_), cudaSuccess); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

template <class T>
void upload(void* dst, const std::vector<T>& host) {
  ASSERT_EQ(cudaMemcpy(dst, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
}

template <class T>
std::vector<T> download(const void* src, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// A host touch of guarded device memory: SIGSEGV, or under ASan its SEGV report and exit 1.
inline bool died_of_segv(int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGSEGV;
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}
#if defined(__SANITIZE_ADDRESS__)
inline constexpr const char* kSegvReport = "SEGV on unknown address";
#else
inline constexpr const char* kSegvReport = "";
#endif

// Every test starts from one default device and no errors; tests that reconfigure restore it.
class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    reset_runtime_errors();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  void TearDown() override { reset_runtime_errors(); }
};

}  // namespace braid::simt::testing
