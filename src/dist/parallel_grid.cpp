// ParallelGrid: layout validation, coordinates from the world rank, one split per axis.
#include "braid/dist/parallel_grid.h"

#include <set>

namespace braid::dist {
namespace {

std::string axes_str(const std::vector<GridAxis>& axes) {
  std::string s;
  for (const auto& a : axes) s += fmt::format("{}{}={}", s.empty() ? "" : " x ", a.name, a.size);
  return s;
}

std::string divisors_str(int n) {
  std::string s;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) s += fmt::format("{}{}", s.empty() ? "" : ", ", d);
  return s;
}

}  // namespace

std::vector<GridAxis> ParallelGrid::default_axes(int tp, int cp, int dp, int pp) {
  return {{"tp", tp}, {"cp", cp}, {"dp", dp}, {"pp", pp}};
}

std::string ParallelGrid::layout_problem(int world_size, const std::vector<GridAxis>& axes) {
  std::set<std::string> names;
  int64_t product = 1;
  for (const auto& a : axes) {
    if (a.name.empty()) return "a grid axis has an empty name";
    if (!names.insert(a.name).second) return fmt::format("grid axis '{}' appears twice", a.name);
    if (a.size < 1)
      return fmt::format("grid axis {} has size {}; every axis needs size >= 1 (1 = unused)",
                         a.name, a.size);
    product *= a.size;
  }
  if (product == world_size) return "";
  std::string msg = fmt::format("layout {} needs {} ranks but the job has {}", axes_str(axes),
                                product, world_size);
  // Suggest how the last non-trivial data axis (dp if present) could absorb the difference.
  for (const auto& a : axes) {
    if (a.name != "dp") continue;
    const int64_t others = product / a.size;
    if (world_size % others == 0)
      msg += fmt::format("; with the other axes as they are, dp={} would fit", world_size / others);
    else
      msg += fmt::format("; the product of tp, cp and pp ({}) must divide {} (its divisors: {})",
                         others, world_size, divisors_str(world_size));
  }
  return msg;
}

ParallelGrid::ParallelGrid(ProcessGroupPtr world, std::vector<GridAxis> axes)
    : world_(std::move(world)), axes_(std::move(axes)) {
  BRAID_CHECK(world_ != nullptr, "ParallelGrid needs a world process group");
  const std::string problem = layout_problem(world_->size(), axes_);
  BRAID_CHECK(problem.empty(), "{}", problem);
  // Coordinates: the first axis varies fastest.
  int rest = world_->rank();
  for (const auto& a : axes_) {
    coords_.push_back(rest % a.size);
    rest /= a.size;
  }
  for (size_t i = 0; i < axes_.size(); ++i) {
    // Color: the world rank with this axis' coordinate zeroed identifies the group uniquely.
    int stride = 1;
    for (size_t j = 0; j < i; ++j) stride *= axes_[j].size;
    const int color = world_->rank() - coords_[i] * stride;
    groups_.push_back(world_->split_by_color(color, coords_[i], axes_[i].name));
  }
}

ParallelGrid::ParallelGrid(ProcessGroupPtr world, std::vector<GridAxis> axes, Device device,
                           const DeviceGroupFactory& device_groups)
    : ParallelGrid(std::move(world), std::move(axes)) {
  BRAID_CHECK(!device.is_cpu(),
              "ParallelGrid: device communicators are for a device, not the CPU (the MPI groups "
              "carry CPU tensors already)");
  BRAID_CHECK(static_cast<bool>(device_groups),
              "ParallelGrid: communicators for {} need a device group factory (NCCL: "
              "braid::dist::nccl_group_factory)",
              device.str());
  device_ = device;
  // In axis order on every rank, so the bootstrap broadcasts pair up.
  for (size_t i = 0; i < axes_.size(); ++i) {
    device_groups_.push_back(device_groups(groups_[i], axes_[i].name));
    BRAID_CHECK(device_groups_.back() != nullptr,
                "ParallelGrid: the device group factory returned no group for axis '{}'",
                axes_[i].name);
  }
}

int ParallelGrid::index_of(const std::string& axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == axis) return static_cast<int>(i);
  std::string names;
  for (const auto& a : axes_) names += (names.empty() ? "" : ", ") + a.name;
  BRAID_FAIL("the grid has no axis '{}' (axes: {})", axis, names);
}

bool ParallelGrid::has_axis(const std::string& axis) const {
  for (const auto& a : axes_)
    if (a.name == axis) return true;
  return false;
}

int ParallelGrid::size(const std::string& axis) const {
  return axes_[index_of(axis)].size;
}
int ParallelGrid::coord(const std::string& axis) const {
  return coords_[index_of(axis)];
}
const ProcessGroupPtr& ParallelGrid::group(const std::string& axis) const {
  return groups_[index_of(axis)];
}

const ProcessGroupPtr& ParallelGrid::group_for(const std::string& axis, Device device) const {
  const int i = index_of(axis);
  if (device.is_cpu()) return groups_[i];
  BRAID_CHECK(device == device_,
              "the grid has no communicator for tensors on {} along '{}' (it has {}); build it "
              "with that device and a device group factory",
              device.str(), axis,
              device_groups_.empty() ? std::string("only the MPI groups")
                                     : "communicators for " + device_.str());
  return device_groups_[i];
}

int ParallelGrid::world_rank_of(const std::map<std::string, int>& coords) const {
  int rank = 0, stride = 1;
  for (size_t i = 0; i < axes_.size(); ++i) {
    auto it = coords.find(axes_[i].name);
    const int c = it == coords.end() ? coords_[i] : it->second;
    BRAID_CHECK(c >= 0 && c < axes_[i].size, "coordinate {}={} outside [0, {})", axes_[i].name, c,
                axes_[i].size);
    rank += c * stride;
    stride *= axes_[i].size;
  }
  return rank;
}

std::string ParallelGrid::describe() const {
  std::string s;
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].size > 1)
      s +=
          fmt::format("{}{}={}/{}", s.empty() ? "" : " ", axes_[i].name, coords_[i], axes_[i].size);
  return s.empty() ? "single" : s;
}

}  // namespace braid::dist
