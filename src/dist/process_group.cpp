// ProcessGroup defaults: chunk arithmetic and "backend X does not support Y" bodies.
#include "braid/dist/process_group.h"

namespace braid::dist {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

int64_t chunk_size(int64_t total, int parts, int index) {
  return total / parts + (index < total % parts ? 1 : 0);
}

int64_t chunk_offset(int64_t total, int parts, int index) {
  const int64_t base = total / parts, extra = total % parts;
  return index * base + std::min<int64_t>(index, extra);
}

ProcessGroup::ProcessGroup(std::string name, int rank, int size, std::vector<int> world_ranks)
    : name_(std::move(name)), rank_(rank), size_(size), world_ranks_(std::move(world_ranks)) {}

void ProcessGroup::unsupported(const char* op) const {
  BRAID_FAIL("backend {} (group {}) does not support {}", backend(), name_, op);
}

WorkPtr ProcessGroup::all_reduce(Tensor&, ReduceOp) {
  unsupported("all_reduce");
}
WorkPtr ProcessGroup::reduce_scatter(const Tensor&, Tensor&, ReduceOp) {
  unsupported("reduce_scatter");
}
WorkPtr ProcessGroup::all_gather(const Tensor&, Tensor&) {
  unsupported("all_gather");
}
WorkPtr ProcessGroup::broadcast(Tensor&, int) {
  unsupported("broadcast");
}
WorkPtr ProcessGroup::send(const Tensor&, int, int) {
  unsupported("send");
}
WorkPtr ProcessGroup::recv(Tensor&, int, int) {
  unsupported("recv");
}
WorkPtr ProcessGroup::barrier() {
  unsupported("barrier");
}
std::shared_ptr<ProcessGroup> ProcessGroup::split_by_color(int, int, std::string) {
  unsupported("split_by_color");
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(const std::vector<int>& ranks, std::string name) {
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    BRAID_CHECK(ranks[i] >= 0 && ranks[i] < size_, "split of group {}: rank {} is not in [0, {})",
                name_, ranks[i], size_);
    if (ranks[i] == rank_) key = static_cast<int>(i);
  }
  return split_by_color(key >= 0 ? 0 : -1, key, std::move(name));
}

}  // namespace braid::dist
