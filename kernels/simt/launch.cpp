// Kernel launches (launch.h): the configuration checks a device makes, stream order, the seeded
// block order, and the odd built-ins that need the launch (fences, clock64, __trap).
#include "launch.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "block.h"
#include "builtins_memory.h"
#include "device_memory.h"
#include "fault.h"
#include "runtime_hooks.h"

namespace braid::simt {
namespace {

constexpr int kErrorInvalidValue = 1;          // cudaErrorInvalidValue
constexpr int kErrorInvalidConfiguration = 9;  // cudaErrorInvalidConfiguration

uint64_t initial_seed() {
  if (const char* env = std::getenv("BRAID_SIMT_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 0);
  return 1;
}

std::atomic<uint64_t>& seed_value() {
  static std::atomic<uint64_t> value{initial_seed()};
  return value;
}
std::atomic<uint64_t> launches{0};

uint64_t mix(uint64_t x) {
  Rng rng{x};
  return rng.next();
}

// The grid's blocks in a seeded random order: a shuffle for grids that fit in memory easily,
// an affine permutation (stride coprime to the count) past that.
class BlockOrder {
 public:
  BlockOrder(uint64_t count, Rng& rng) : count_(count) {
    if (count <= (uint64_t{1} << 20)) {
      order_.resize(count);
      std::iota(order_.begin(), order_.end(), uint64_t{0});
      for (uint64_t i = count; i > 1; --i) std::swap(order_[i - 1], order_[rng.next() % i]);
      return;
    }
    do stride_ = rng.next() % count | 1;
    while (std::gcd(stride_, count) != 1);
    offset_ = rng.next() % count;
  }
  uint64_t operator[](uint64_t i) const {
    if (!order_.empty()) return order_[i];
    return static_cast<uint64_t>((static_cast<unsigned __int128>(i) * stride_ + offset_) % count_);
  }

 private:
  uint64_t count_;
  std::vector<uint64_t> order_;
  uint64_t stride_ = 1, offset_ = 0;
};

std::string dims(dim3 d) {
  return fmt::format("({}, {}, {})", d.x, d.y, d.z);
}

// The configuration error a device reports for this launch, or an empty string.
std::string configuration_error(const LaunchConfig& c, int* code) {
  const LaunchLimits& limits = launch_limits();
  *code = kErrorInvalidConfiguration;
  if (c.block.x == 0 || c.block.y == 0 || c.block.z == 0 || c.grid.x == 0 || c.grid.y == 0 ||
      c.grid.z == 0)
    return "a grid or block dimension is 0";
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  if (threads > limits.max_threads_per_block)
    return fmt::format("{} threads per block exceed the device's {}", threads,
                       limits.max_threads_per_block);
  const unsigned block[3] = {c.block.x, c.block.y, c.block.z};
  const unsigned grid[3] = {c.grid.x, c.grid.y, c.grid.z};
  for (int i = 0; i < 3; ++i) {
    if (block[i] > limits.max_block_dim[i])
      return fmt::format("block dimension {} is {}, above the device's {}", "xyz"[i], block[i],
                         limits.max_block_dim[i]);
    if (grid[i] > limits.max_grid_dim[i])
      return fmt::format("grid dimension {} is {}, above the device's {}", "xyz"[i], grid[i],
                         limits.max_grid_dim[i]);
  }
  const size_t smem_limit = dynamic_shared_limit(c.kernel);
  if (c.dynamic_smem > smem_limit) {
    *code = kErrorInvalidValue;
    return fmt::format(
        "{} bytes of dynamic shared memory exceed the kernel's limit of {} (raise "
        "it with cudaFuncSetAttribute(MaxDynamicSharedMemorySize))",
        c.dynamic_smem, smem_limit);
  }
  return {};
}

}  // namespace

void set_seed(uint64_t value) {
  seed_value().store(value);
  launches.store(0);
}

uint64_t seed() {
  return seed_value().load();
}

void launch_kernel(const LaunchConfig& config, KernelInvoker invoke, const void* call) {
  if (tls_thread != nullptr) {
    block_fault([&] {
      return FaultRecord{"unsupported launch",
                         std::string("kernel ") + config.name +
                             " launched from device code: dynamic parallelism is not emulated",
                         {}};
    }());
  }
  int code = 0;
  const std::string error = configuration_error(config, &code);
  if (!error.empty()) {
    set_launch_error(code,
                     fmt::format("launch of {}<<<{}, {}, {}>>>: {}", config.name, dims(config.grid),
                                 dims(config.block), config.dynamic_smem, error));
    return;
  }
  LaunchState launch;
  launch.kernel_name = config.name;
  launch.grid = config.grid;
  launch.block = config.block;
  launch.dynamic_smem = config.dynamic_smem;
  launch.seed = mix(seed() ^ mix(launches.fetch_add(1) + 0x51a7));
  launch.invoke = invoke;
  launch.params = call;
  run_on_stream(config.stream, [&] {
    DeviceAccess access;  // device memory is reachable while the kernel runs
    Rng rng{launch.seed};
    const uint64_t gx = config.grid.x, gy = config.grid.y;
    const uint64_t count = gx * gy * config.grid.z;
    const BlockOrder order(count, rng);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t b = order[i];
      run_block(launch, b,
                uint3{static_cast<unsigned>(b % gx), static_cast<unsigned>(b / gx % gy),
                      static_cast<unsigned>(b / (gx * gy))});
    }
  });
}

[[noreturn]] void trap(const char* what) {
  if (tls_thread == nullptr) throw KernelFault(std::string("simt: ") + what + " in host code");
  block_fault([&] {
    return FaultRecord{
        "trap",
        std::string("thread ") + thread_name(*tls_block, tls_thread->linear) + " executed " + what,
        {}};
  }());
}

long long clock_ticks() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

}  // namespace braid::simt

void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
void __threadfence_system() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
