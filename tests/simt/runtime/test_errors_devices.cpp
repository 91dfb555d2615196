// Errors and devices of the emulated runtime: codes and texts, last-error and sticky rules,
// launch errors, device models and counts, kernel attributes and launch limits.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "braid/core/error.h"
#include "runtime_test_util.h"
#include "simt/device_memory.h"
#include "simt/runtime_hooks.h"

namespace braid::simt {
namespace {

using testing::DeviceBuffer;

class ErrorTest : public testing::RuntimeTest {};
class DeviceTest : public testing::RuntimeTest {
 protected:
  void TearDown() override {
    configure_emulated_devices(DeviceModelKind::h100, 1);
    testing::RuntimeTest::TearDown();
  }
};

TEST_F(ErrorTest, CodesHaveCudasValuesNamesAndTexts) {
  // The values braid and the launcher rely on, as the CUDA Runtime API defines them.
  EXPECT_EQ(cudaSuccess, 0);
  EXPECT_EQ(cudaErrorInvalidValue, 1);
  EXPECT_EQ(cudaErrorMemoryAllocation, 2);
  EXPECT_EQ(cudaErrorCudartUnloading, 4);
  EXPECT_EQ(cudaErrorInvalidConfiguration, 9);
  EXPECT_EQ(cudaErrorInvalidPitchValue, 12);
  EXPECT_EQ(cudaErrorInvalidMemcpyDirection, 21);
  EXPECT_EQ(cudaErrorInsufficientDriver, 35);
  EXPECT_EQ(cudaErrorInvalidDeviceFunction, 98);
  EXPECT_EQ(cudaErrorNoDevice, 100);
  EXPECT_EQ(cudaErrorInvalidDevice, 101);
  EXPECT_EQ(cudaErrorInvalidResourceHandle, 400);
  EXPECT_EQ(cudaErrorNotReady, 600);
  EXPECT_EQ(cudaErrorIllegalAddress, 700);
  EXPECT_EQ(cudaErrorLaunchOutOfResources, 701);
  EXPECT_EQ(cudaErrorMisalignedAddress, 716);
  EXPECT_EQ(cudaErrorLaunchFailure, 719);
  EXPECT_EQ(cudaErrorNotSupported, 801);
  EXPECT_EQ(cudaErrorUnknown, 999);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(12345)), "unrecognized error code");
  EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(12345)), "unrecognized error code");
  // Every listed code has its own name.
  for (int code = 0; code < 1000; ++code) {
    const std::string name = cudaGetErrorName(static_cast<cudaError_t>(code));
    if (name != "unrecognized error code") EXPECT_EQ(name.rfind("cuda", 0), 0u) << code;
  }
}

TEST_F(ErrorTest, LastErrorIsPerThreadReadOnceAndPeekable) {
  EXPECT_EQ(cudaSetDevice(99), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMalloc(nullptr, 1), cudaErrorInvalidValue);
  int count = 0;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);  // success leaves the last error alone
  std::thread([] { EXPECT_EQ(cudaGetLastError(), cudaSuccess); }).join();
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

TEST_F(ErrorTest, ALaunchConfigurationErrorIsNotSticky) {
  set_launch_error(cudaErrorInvalidConfiguration, "block of 2048 threads (limit 1024)");
  EXPECT_EQ(last_launch_error_detail(), "block of 2048 threads (limit 1024)");
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  DeviceBuffer still_works(16);
  EXPECT_EQ(cudaMemset(still_works.get(), 0, 16), cudaSuccess);
}

TEST_F(ErrorTest, AKernelFaultIsStickyForEveryCallAndThread) {
  DeviceBuffer buffer(16);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  set_launch_error(cudaErrorIllegalAddress, "a kernel read past an allocation");
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // never cleared
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorIllegalAddress);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemset(buffer.get(), 0, 16), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  bool ran = false;
  run_on_stream(stream, [&] { ran = true; });
  EXPECT_FALSE(ran);  // a launch after the fault does not run
  std::thread([] {
    EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  }).join();
  // A second fault does not replace the first.
  set_launch_error(cudaErrorLaunchFailure, "another");
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  reset_runtime_errors();  // what a new process would see (the test fixture's own cleanup)
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// (The default without BRAID_SIMT_DEVICE, one H100, is EnvironmentChoosesTheModel's.)
TEST_F(DeviceTest, H100Model) {
  configure_emulated_devices(DeviceModelKind::h100, 1);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_STREQ(prop.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.maxThreadsDim[0], 1024);
  EXPECT_EQ(prop.maxThreadsDim[2], 64);
  EXPECT_EQ(prop.maxGridSize[0], 2147483647);
  EXPECT_EQ(prop.maxGridSize[1], 65535);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.sharedMemPerBlock, 48u * 1024);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 227u * 1024);
  EXPECT_EQ(prop.sharedMemPerMultiprocessor, 228u * 1024);
  EXPECT_EQ(prop.totalGlobalMem, 81559ull << 20);
  EXPECT_EQ(prop.l2CacheSize, 50 << 20);
  EXPECT_EQ(prop.memoryBusWidth, 5120);
  EXPECT_EQ(prop.regsPerBlock, 65536);
  EXPECT_EQ(prop.maxThreadsPerMultiProcessor, 2048);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, -1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetDeviceProperties(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceCount(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(device_memory_capacity(), prop.totalGlobalMem);
}

TEST_F(DeviceTest, H200Model) {
  configure_emulated_devices(DeviceModelKind::h200, 1);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_STREQ(prop.name, "NVIDIA H200");
  EXPECT_EQ(prop.totalGlobalMem, 143771ull << 20);
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 227u * 1024);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, 143771ull << 20);
  EXPECT_EQ(device_memory_capacity(), total);
}

TEST_F(DeviceTest, SeveralDevicesEachWithItsOwnMemory) {
  configure_emulated_devices(DeviceModelKind::h100, 2);
  int count = 0, device = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 1);
  std::thread([] {  // the current device is per thread
    int d = -1;
    EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
    EXPECT_EQ(d, 0);
  })
      .join();
  size_t free0 = 0, free1 = 0, total = 0;
  {
    DeviceBuffer on1(1 << 20);
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    EXPECT_EQ(free0 - free1, 1u << 20);
    EXPECT_EQ(free0, total);
    cudaStream_t on0 = nullptr;  // a copy across devices, issued on device 0
    ASSERT_EQ(cudaStreamCreate(&on0), cudaSuccess);
    DeviceBuffer other(1 << 20);
    ASSERT_EQ(cudaMemsetAsync(other.get(), 3, 1 << 20, on0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(on1.get(), other.get(), 1 << 20, cudaMemcpyDefault, on0),
              cudaSuccess);
    EXPECT_EQ(first_uninitialized(on1.get(), 1 << 20), nullptr);
    ASSERT_EQ(cudaStreamDestroy(on0), cudaSuccess);
  }
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  // Reconfiguring while memory is allocated is refused.
  DeviceBuffer held(16);
  EXPECT_THROW(configure_emulated_devices(DeviceModelKind::h200, 1), braid::Error);
}

TEST_F(DeviceTest, DynamicSharedMemoryOptIn) {
  static int kernel_a, kernel_b;  // stand-ins for two kernels' addresses
  const void* a = &kernel_a;
  const void* b = &kernel_b;
  EXPECT_EQ(dynamic_shared_limit(a), 48u * 1024);
  EXPECT_EQ(cudaFuncSetAttribute(a, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024),
            cudaSuccess);
  EXPECT_EQ(dynamic_shared_limit(a), 227u * 1024);
  EXPECT_EQ(dynamic_shared_limit(b), 48u * 1024);  // per kernel
  EXPECT_EQ(cudaFuncSetAttribute(b, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(b, cudaFuncAttributeMaxDynamicSharedMemorySize, -1),
            cudaErrorInvalidValue);
  EXPECT_EQ(dynamic_shared_limit(b), 48u * 1024);
  EXPECT_EQ(cudaFuncSetAttribute(nullptr, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaFuncSetAttribute(a, cudaFuncAttributePreferredSharedMemoryCarveout, 50),
            cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(a, cudaFuncAttributePreferredSharedMemoryCarveout, 101),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(a, static_cast<cudaFuncAttribute>(3), 1), cudaErrorInvalidValue);
  // A smaller value lowers the limit again.
  EXPECT_EQ(cudaFuncSetAttribute(a, cudaFuncAttributeMaxDynamicSharedMemorySize, 1000),
            cudaSuccess);
  EXPECT_EQ(dynamic_shared_limit(a), 1000u);
}

TEST_F(DeviceTest, LaunchLimitsAreTheModels) {
  const LaunchLimits& limits = launch_limits();
  EXPECT_EQ(limits.max_threads_per_block, 1024u);
  EXPECT_EQ(limits.max_block_dim[0], 1024u);
  EXPECT_EQ(limits.max_block_dim[2], 64u);
  EXPECT_EQ(limits.max_grid_dim[0], 2147483647u);
  EXPECT_EQ(limits.max_grid_dim[1], 65535u);
  EXPECT_EQ(limits.static_shared_per_block, 48u * 1024);
}

// Run in a child process by EnvironmentChoosesTheModel: reports what the environment configured.
TEST(DISABLED_EnvironmentProbe, Report) {
  try {
    int count = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&count) == cudaSuccess &&
        cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
      std::printf("model=%s count=%d\n", prop.name, count);
  } catch (const braid::Error& e) {
    std::printf("error=%s\n", e.what());
  }
}

// The output of this binary's environment probe run with `environment` set.
std::string probe(const std::string& environment) {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  EXPECT_GT(n, 0);
  const std::string command = "env " + environment + " " + self +
                              " --gtest_also_run_disabled_tests"
                              " --gtest_filter=DISABLED_EnvironmentProbe.Report 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  char buffer[512];
  while (pipe != nullptr && std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  if (pipe != nullptr) pclose(pipe);
  return output;
}

TEST(EnvironmentTest, EnvironmentChoosesTheModel) {
  EXPECT_NE(probe("-u BRAID_SIMT_DEVICE -u BRAID_SIMT_DEVICES")
                .find("model=NVIDIA H100 80GB HBM3 count=1"),
            std::string::npos);
  EXPECT_NE(probe("BRAID_SIMT_DEVICE=h200 BRAID_SIMT_DEVICES=2").find("model=NVIDIA H200 count=2"),
            std::string::npos);
  EXPECT_NE(probe("BRAID_SIMT_DEVICE=a100")
                .find("error=simt: BRAID_SIMT_DEVICE=a100 names no emulated device (h100 or h200)"),
            std::string::npos);
  EXPECT_NE(
      probe("BRAID_SIMT_DEVICES=0").find("error=simt: BRAID_SIMT_DEVICES=0 is not a device count"),
      std::string::npos);
}

}  // namespace
}  // namespace braid::simt
