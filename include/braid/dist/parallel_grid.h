// ParallelGrid: the world cut into named axes (tp, cp, dp, pp, ...), a group per axis.
//
// The first axis varies fastest over world ranks (default order tp, cp, dp, pp keeps a
// tensor-parallel group inside a node). A new axis is a name, not new code. The grid is
// passed to whoever needs groups; there is no global group state.
//
// Every axis has an MPI group (host tensors, control, bootstrap). Asked for a device, the grid
// also makes one device communicator per axis (NCCL, or its stand-in on the emulated device)
// from that MPI group: rank 0 of each group draws the unique id and broadcasts it over the MPI
// group. group_for(axis, device) then gives the one a tensor on `device` goes through.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "braid/core/device.h"
#include "braid/dist/process_group.h"

namespace braid::dist {

// Makes the device communicator of one axis from its MPI group; collective over that group.
// The NCCL backend provides one (dist/nccl_process_group.h: nccl_group_factory), outside
// libbraid, so libbraid never links NCCL.
using DeviceGroupFactory =
    std::function<ProcessGroupPtr(const ProcessGroupPtr& mpi_group, const std::string& axis)>;

struct GridAxis {
  std::string name;
  int size = 1;
};

class ParallelGrid {
 public:
  // Collective over `world`: builds one group per axis. Throws a clear error when an axis
  // size is < 1, names repeat, or the product of the sizes differs from the world size
  // (the message says what would divide).
  ParallelGrid(ProcessGroupPtr world, std::vector<GridAxis> axes);
  // The same, plus one device communicator per axis made by `device_groups` for `device` (a
  // cuda device); collective over `world`.
  ParallelGrid(ProcessGroupPtr world, std::vector<GridAxis> axes, Device device,
               const DeviceGroupFactory& device_groups);

  // tp, cp, dp, pp in that order (the DESIGN.md default).
  static std::vector<GridAxis> default_axes(int tp, int cp, int dp, int pp);
  // The error ParallelGrid would raise for these sizes on `world_size` ranks, or "".
  static std::string layout_problem(int world_size, const std::vector<GridAxis>& axes);

  const ProcessGroupPtr& world() const { return world_; }
  const std::vector<GridAxis>& axes() const { return axes_; }
  bool has_axis(const std::string& axis) const;
  int size(const std::string& axis) const;
  int coord(const std::string& axis) const;  // this rank's coordinate on the axis
  // The ranks that differ from this one only along `axis`, ordered by their coordinate.
  const ProcessGroupPtr& group(const std::string& axis) const;
  // The group a tensor on `device` uses along `axis`: the MPI group for the CPU, the device
  // communicator for the grid's device. Throws naming the device when the grid has none for it.
  const ProcessGroupPtr& group_for(const std::string& axis, Device device) const;
  // The device the grid has communicators for (the CPU when it has none).
  Device device() const { return device_; }
  // World rank of the given coordinates (missing axes: this rank's coordinate).
  int world_rank_of(const std::map<std::string, int>& coords) const;
  // "tp=0/2 dp=1/2 pp=0/1" for log prefixes and messages.
  std::string describe() const;

 private:
  int index_of(const std::string& axis) const;
  ProcessGroupPtr world_;
  std::vector<GridAxis> axes_;
  std::vector<int> coords_;
  std::vector<ProcessGroupPtr> groups_;
  Device device_;
  std::vector<ProcessGroupPtr> device_groups_;  // per axis, when device_ is not the CPU
};

}  // namespace braid::dist
