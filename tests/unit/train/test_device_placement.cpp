// training.device: the local rank from the launcher's variables, and what "cpu" and "cuda"
// resolve to (or why they cannot) in this build.
#include "braid/train/device_placement.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "braid/core/device_count.h"
#include "braid/core/error.h"
#include "braid/ops/kernel_registry.h"

namespace braid::train {
namespace {

// An environment of exactly these variables.
auto env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected braid::Error";
  return "";
}

TEST(DevicePlacement, LocalRankComesFromTheFirstLauncherVariableSet) {
  EXPECT_EQ(launcher_local_rank(env_of({})), 0);
  EXPECT_EQ(launcher_local_rank(env_of({{"SLURM_LOCALID", "2"}})), 2);
  EXPECT_EQ(launcher_local_rank(env_of({{"MPI_LOCALRANKID", "5"}, {"SLURM_LOCALID", "2"}})), 5);
  EXPECT_EQ(
      launcher_local_rank(env_of(
          {{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"MPI_LOCALRANKID", "5"}, {"SLURM_LOCALID", "2"}})),
      0);
  EXPECT_EQ(launcher_local_rank(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "7"}})), 7);
}

TEST(DevicePlacement, ALocalRankThatIsNotANumberIsNamed) {
  for (const std::string bad : {"", "-1", "1x", "x", " 1", "99999999999"}) {
    const std::string e = error_of([&] {
      launcher_local_rank(env_of({{"MPI_LOCALRANKID", bad}}));
    });
    EXPECT_NE(e.find("MPI_LOCALRANKID='" + bad + "' is not a local rank"), std::string::npos) << e;
  }
}

TEST(DevicePlacement, CpuAlwaysWorksAndOtherNamesAreRejected) {
  EXPECT_EQ(device_problem("cpu"), "");
  EXPECT_EQ(training_device("cpu", env_of({{"SLURM_LOCALID", "3"}})), Device::cpu());
  for (const std::string bad : {"gpu", "CUDA", "cuda:0", ""}) {
    EXPECT_EQ(device_problem(bad), "must be \"cpu\" or \"cuda\"") << bad;
    const std::string e = error_of([&] { training_device(bad, env_of({})); });
    EXPECT_NE(e.find("training.device \"" + bad + "\" must be"), std::string::npos) << e;
  }
}

// What "cuda" resolves to depends on the build and the machine; each answer is checked.
TEST(DevicePlacement, CudaNeedsTheBackendAndAVisibleDevice) {
  ops::KernelRegistry::instance();
  const std::string problem = device_problem("cuda");
  if (!device_kind_compiled(DeviceKind::cuda)) {
    EXPECT_NE(problem.find("needs the CUDA backend, and this build has none"), std::string::npos)
        << problem;
  } else if (device_count(DeviceKind::cuda) == 0) {
    EXPECT_NE(problem.find("no CUDA device is visible"), std::string::npos) << problem;
    EXPECT_NE(error_of([] { training_device("cuda", env_of({})); }).find("no CUDA device"),
              std::string::npos);
  } else {
    const int devices = device_count(DeviceKind::cuda);
    EXPECT_EQ(problem, "");
    EXPECT_EQ(training_device("cuda", env_of({})), Device::cuda(0));
    EXPECT_EQ(training_device("cuda", env_of({{"SLURM_LOCALID", std::to_string(devices - 1)}})),
              Device::cuda(devices - 1));
    const std::string e = error_of([&] {
      training_device("cuda", env_of({{"SLURM_LOCALID", std::to_string(devices)}}));
    });
    EXPECT_NE(e.find("start at most"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace braid::train
