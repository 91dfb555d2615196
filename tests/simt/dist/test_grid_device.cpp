// ParallelGrid with device communicators on the emulated device: one NcclProcessGroup per axis
// beside each MPI group, group_for picking by device, and the errors of a grid without them.
#include <gtest/gtest.h>

#include "braid/dist/parallel_grid.h"
#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"
#include "dist_test.h"
#include "support/test_util.h"

namespace braid::dist::testing {
namespace {

class GridDevice : public DistTest {
 protected:
  static void SetUpTestSuite() { cuda::ensure_registered(); }
};

TEST_F(GridDevice, EveryAxisHasACommunicatorBesideItsMpiGroup) {
  ParallelGrid grid(world_ptr(), ParallelGrid::default_axes(1, 1, size(), 1), Device::cuda(0),
                    nccl_group_factory(0));
  EXPECT_EQ(grid.device(), Device::cuda(0));
  for (const char* axis : {"tp", "cp", "dp", "pp"}) {
    const ProcessGroupPtr& host = grid.group_for(axis, Device::cpu());
    const ProcessGroupPtr& device = grid.group_for(axis, Device::cuda(0));
    EXPECT_EQ(host, grid.group(axis)) << axis;
    EXPECT_EQ(host->backend(), "mpi") << axis;
    EXPECT_EQ(device->backend(), "nccl") << axis;
    EXPECT_EQ(device->name(), axis);
    EXPECT_EQ(device->rank(), host->rank()) << axis;
    EXPECT_EQ(device->size(), host->size()) << axis;
  }
  // The dp communicator sums device tensors over the world.
  Tensor t = Tensor::full({4}, static_cast<float>(rank() + 1)).to(Device::cuda(0));
  grid.group_for("dp", t.device())->all_reduce(t)->wait();
  EXPECT_EQ(t.to(Device::cpu()).to_vector()[3], static_cast<float>(size() * (size() + 1) / 2));
}

TEST_F(GridDevice, AGridWithoutCommunicatorsSaysSo) {
  ParallelGrid grid(world_ptr(), ParallelGrid::default_axes(1, 1, size(), 1));
  EXPECT_TRUE(grid.device().is_cpu());
  EXPECT_ERROR_CONTAINS(grid.group_for("dp", Device::cuda(0)),
                        "no communicator for tensors on cuda:0");
  EXPECT_ERROR_CONTAINS(ParallelGrid(world_ptr(), ParallelGrid::default_axes(1, 1, size(), 1),
                                     Device::cuda(0), DeviceGroupFactory()),
                        "need a device group factory");
  EXPECT_ERROR_CONTAINS(ParallelGrid(world_ptr(), ParallelGrid::default_axes(1, 1, size(), 1),
                                     Device::cpu(), nccl_group_factory(0)),
                        "not the CPU");
}

}  // namespace
}  // namespace braid::dist::testing
