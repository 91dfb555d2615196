// The emulated device: the GPU model it imitates, how many there are, and the runtime's hooks
// for tests. Chosen by BRAID_SIMT_DEVICE=h100|h200 (default h100) and BRAID_SIMT_DEVICES=N
// (default 1), read at the runtime's first use; implemented in runtime/devices.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid::simt {

enum class DeviceModelKind { h100, h200 };

// What cudaGetDeviceProperties reports for the model (each device of the emulator is one).
struct DeviceModel {
  DeviceModelKind kind;
  const char* key;       // "h100": the BRAID_SIMT_DEVICE value
  const char* name;      // as CUDA reports it
  size_t global_memory;  // bytes, as the device reports them (more than the marketed GB)
  int major, minor;      // compute capability
  int multiprocessors;
  int max_threads_per_block;
  int max_threads_per_multiprocessor;
  int max_blocks_per_multiprocessor;
  size_t shared_per_block;        // the default limit of a launch
  size_t shared_per_block_optin;  // what cudaFuncSetAttribute may raise it to
  size_t shared_per_multiprocessor;
  size_t reserved_shared_per_block;  // taken by the system from each block's share
  int registers_per_block;
  int registers_per_multiprocessor;
  int l2_cache_bytes;
  int memory_bus_width_bits;
  size_t constant_memory;
};

const DeviceModel& device_model(DeviceModelKind kind);
// The configured model and device count (reading the environment on first use).
const DeviceModel& emulated_device_model();
int emulated_device_count();

// Tests: switches the model and device count. Fails (braid::Error) while device memory is
// allocated; forgets kernel attributes and resets the calling thread's current device to 0.
void configure_emulated_devices(DeviceModelKind kind, int count);

// Tests: clears the sticky error and the calling thread's last error, as a fresh process starts.
void reset_runtime_errors();

// Tests: how often the runtime's memory calls ran since the process started (never reset), so
// a test can prove a stretch of braid's code made none. Failed calls are counted too.
struct RuntimeCallCounts {
  uint64_t malloc = 0;        // cudaMalloc
  uint64_t free = 0;          // cudaFree of a non-null pointer
  uint64_t malloc_async = 0;  // cudaMallocAsync
  uint64_t free_async = 0;    // cudaFreeAsync of a non-null pointer
  // Copies and memsets issued on the legacy default stream (nullptr or cudaStreamLegacy),
  // cudaMemcpy and cudaMemset included.
  uint64_t legacy_stream_ops = 0;
};
RuntimeCallCounts runtime_call_counts();

// Tests: caps each device's memory at `bytes` (0: the model's global memory again). cudaMalloc
// fails past it and cudaMemGetInfo reports it as the total; what is allocated stays.
void set_emulated_memory_limit(size_t bytes);

// The text of the calling thread's last launch error (set_launch_error's `what`), for messages.
std::string last_launch_error_detail();

}  // namespace braid::simt
