// training.device: its validation and the device each rank takes.
#include "braid/train/device_placement.h"

#include <charconv>
#include <cstring>

#include "braid/core/device_count.h"
#include "braid/core/error.h"
#include "braid/ops/kernel_registry.h"

namespace braid::train {
namespace {

// The backends register their device counters with the kernel table.
int cuda_devices() {
  ops::KernelRegistry::instance();
  return device_count(DeviceKind::cuda);
}

}  // namespace

int launcher_local_rank(const std::function<const char*(const char*)>& env) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* value = env(name);
    if (value == nullptr) continue;
    int rank = -1;
    const char* end = value + std::strlen(value);
    const auto [ptr, ec] = std::from_chars(value, end, rank);
    BRAID_CHECK(ec == std::errc() && ptr == end && ptr != value && rank >= 0,
                "{}='{}' is not a local rank (a non-negative integer)", name, value);
    return rank;
  }
  return 0;
}

std::string device_problem(const std::string& name) {
  if (name == "cpu") return "";
  if (name != "cuda") return "must be \"cpu\" or \"cuda\"";
  ops::KernelRegistry::instance();
  if (!device_kind_compiled(DeviceKind::cuda))
    return "needs the CUDA backend, and this build has none (configure with nvcc on "
           "PATH or -DBRAID_CUDA=ON), or use \"cpu\"";
  if (cuda_devices() == 0)
    return "but no CUDA device is visible to this process (check nvidia-smi and "
           "CUDA_VISIBLE_DEVICES), or use \"cpu\"";
  return "";
}

Device training_device(const std::string& name,
                       const std::function<const char*(const char*)>& env) {
  const std::string problem = device_problem(name);
  BRAID_CHECK(problem.empty(), "training.device \"{}\" {}", name, problem);
  if (name == "cpu") return Device::cpu();
  const int local = launcher_local_rank(env);
  const int devices = cuda_devices();
  BRAID_CHECK(local < devices,
              "local rank {} needs cuda:{}, but this machine shows {} CUDA device(s); start at "
              "most {} ranks per machine",
              local, local, devices, devices);
  return Device::cuda(local);
}

}  // namespace braid::train
