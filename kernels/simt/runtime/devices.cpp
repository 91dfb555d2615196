// The emulated devices: the H100/H200 models, their configuration from the environment, the
// device calls of the runtime API, kernel attributes and the limits the launcher checks.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "braid/core/error.h"
#include "runtime_state.h"
#include "simt/device_memory.h"
#include "simt/emulated_device.h"
#include "simt/runtime_hooks.h"

namespace braid::simt {
namespace {

constexpr size_t kKiB = 1024;
constexpr int kMaxDevices = 16;

// Hopper SXM parts: the same GH100 die (compute capability 9.0, 132 SMs enabled, 50 MiB of L2,
// a 5120-bit HBM interface, 228 KiB of shared memory per SM of which a block may opt in to 227),
// differing in memory. Memory sizes are what the devices report (81,559 and 143,771 MiB).
constexpr DeviceModel kModels[] = {
    {DeviceModelKind::h100, "h100", "NVIDIA H100 80GB HBM3", size_t{81559} << 20, 9, 0, 132, 1024,
     2048, 32, 48 * kKiB, 227 * kKiB, 228 * kKiB, 1 * kKiB, 65536, 65536, 50 << 20, 5120,
     64 * kKiB},
    {DeviceModelKind::h200, "h200", "NVIDIA H200", size_t{143771} << 20, 9, 0, 132, 1024, 2048, 32,
     48 * kKiB, 227 * kKiB, 228 * kKiB, 1 * kKiB, 65536, 65536, 50 << 20, 5120, 64 * kKiB},
};

struct Configuration {
  const DeviceModel* model = nullptr;
  int count = 0;
};

std::mutex g_config_mutex;
Configuration g_config;  // set once from the environment, or by configure_emulated_devices
thread_local int t_device = 0;

std::mutex g_attribute_mutex;
std::map<const void*, size_t> g_dynamic_shared;  // cudaFuncAttributeMaxDynamicSharedMemorySize

const DeviceModel& model_named(const char* key) {
  for (const DeviceModel& m : kModels)
    if (std::strcmp(m.key, key) == 0) return m;
  throw Error(
      fmt::format("simt: BRAID_SIMT_DEVICE={} names no emulated device (h100 or h200)", key));
}

void apply(const DeviceModel& model, int count) {
  set_device_memory_capacity(model.global_memory * static_cast<size_t>(count));
  g_config.model = &model;
  g_config.count = count;
}

const Configuration& configuration() {
  std::lock_guard lock(g_config_mutex);
  if (g_config.model == nullptr) {
    const char* key = std::getenv("BRAID_SIMT_DEVICE");
    const DeviceModel& model = model_named(key != nullptr && *key != '\0' ? key : "h100");
    int count = 1;
    if (const char* n = std::getenv("BRAID_SIMT_DEVICES"); n != nullptr && *n != '\0') {
      char* end = nullptr;
      const long parsed = std::strtol(n, &end, 10);
      if (*end != '\0' || parsed < 1 || parsed > kMaxDevices)
        throw Error(fmt::format("simt: BRAID_SIMT_DEVICES={} is not a device count in 1..{}", n,
                                kMaxDevices));
      count = static_cast<int>(parsed);
    }
    apply(model, count);
  }
  return g_config;
}

LaunchLimits limits_of(const DeviceModel& model) {
  LaunchLimits limits;
  limits.max_threads_per_block = static_cast<unsigned>(model.max_threads_per_block);
  limits.static_shared_per_block = model.shared_per_block;
  return limits;
}

}  // namespace

const DeviceModel& device_model(DeviceModelKind kind) {
  for (const DeviceModel& m : kModels)
    if (m.kind == kind) return m;
  throw Error("simt: unknown device model");
}

const DeviceModel& emulated_device_model() {
  return *configuration().model;
}
int emulated_device_count() {
  return configuration().count;
}

void configure_emulated_devices(DeviceModelKind kind, int count) {
  if (count < 1 || count > kMaxDevices)
    throw Error(fmt::format("simt: {} emulated devices requested (1..{})", count, kMaxDevices));
  (void)configuration();  // the environment's choice, replaced below
  {
    std::lock_guard lock(g_config_mutex);
    if (device_memory_in_use() != 0)
      throw Error(
          fmt::format("simt: cannot change the emulated devices while {} bytes of device "
                      "memory are allocated",
                      device_memory_in_use()));
    apply(device_model(kind), count);
  }
  rt::reset_memory_accounting();
  rt::reset_kernel_attributes();
  t_device = 0;
}

namespace rt {

int current_device() {
  return t_device < configuration().count ? t_device : 0;
}
void set_current_device(int device) {
  t_device = device;
}

void reset_kernel_attributes() {
  std::lock_guard lock(g_attribute_mutex);
  g_dynamic_shared.clear();
}

}  // namespace rt

size_t dynamic_shared_limit(const void* kernel) {
  {
    std::lock_guard lock(g_attribute_mutex);
    if (auto it = g_dynamic_shared.find(kernel); it != g_dynamic_shared.end()) return it->second;
  }
  return emulated_device_model().shared_per_block;
}

const LaunchLimits& launch_limits() {
  // One per model, built once: the launcher may hold the reference across a reconfiguration.
  static const LaunchLimits h100 = limits_of(device_model(DeviceModelKind::h100));
  static const LaunchLimits h200 = limits_of(device_model(DeviceModelKind::h200));
  return emulated_device_model().kind == DeviceModelKind::h200 ? h200 : h100;
}

}  // namespace braid::simt

namespace rt = braid::simt::rt;

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return rt::record(cudaErrorInvalidValue);
  *count = braid::simt::emulated_device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return rt::record(cudaErrorInvalidValue);
  *device = rt::current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= braid::simt::emulated_device_count())
    return rt::record(cudaErrorInvalidDevice);
  rt::set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return rt::record(cudaErrorInvalidValue);
  if (device < 0 || device >= braid::simt::emulated_device_count())
    return rt::record(cudaErrorInvalidDevice);
  const braid::simt::DeviceModel& m = braid::simt::emulated_device_model();
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, m.name, sizeof(prop->name) - 1);
  prop->totalGlobalMem = m.global_memory;
  prop->sharedMemPerBlock = m.shared_per_block;
  prop->regsPerBlock = m.registers_per_block;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = m.max_threads_per_block;
  const braid::simt::LaunchLimits& limits = braid::simt::launch_limits();
  for (int d = 0; d < 3; ++d) {
    prop->maxThreadsDim[d] = static_cast<int>(limits.max_block_dim[d]);
    prop->maxGridSize[d] = static_cast<int>(limits.max_grid_dim[d]);
  }
  prop->totalConstMem = m.constant_memory;
  prop->major = m.major;
  prop->minor = m.minor;
  prop->textureAlignment = 512;
  prop->multiProcessorCount = m.multiprocessors;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = m.memory_bus_width_bits;
  prop->l2CacheSize = m.l2_cache_bytes;
  prop->maxThreadsPerMultiProcessor = m.max_threads_per_multiprocessor;
  prop->regsPerMultiprocessor = m.registers_per_multiprocessor;
  prop->managedMemory = 1;
  prop->sharedMemPerMultiprocessor = m.shared_per_multiprocessor;
  prop->sharedMemPerBlockOptin = m.shared_per_block_optin;
  prop->reservedSharedMemPerBlock = m.reserved_shared_per_block;
  prop->maxBlocksPerMultiProcessor = m.max_blocks_per_multiprocessor;
  prop->cooperativeLaunch = 1;
  prop->memoryPoolsSupported = 1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (const cudaError_t sticky = rt::sticky_error()) return rt::record(sticky);
  if (func == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
  const braid::simt::DeviceModel& m = braid::simt::emulated_device_model();
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      // The opt-in limit covers static and dynamic shared memory together; the launcher, which
      // knows the kernel's static arrays, checks the sum at each launch.
      if (value < 0 || static_cast<size_t>(value) > m.shared_per_block_optin)
        return rt::record(cudaErrorInvalidValue);
      {
        std::lock_guard lock(braid::simt::g_attribute_mutex);
        braid::simt::g_dynamic_shared[func] = static_cast<size_t>(value);
      }
      return cudaSuccess;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      // A hint: -1 (no preference) or a percentage; the emulator has no L1 to carve.
      if (value < -1 || value > 100) return rt::record(cudaErrorInvalidValue);
      return cudaSuccess;
  }
  return rt::record(cudaErrorInvalidValue);
}
