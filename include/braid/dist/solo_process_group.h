// A process group of one rank without any transport: the world of a process started without
// MPI (tests, single-process training). Every collective completes at once.
#pragma once

#include "braid/dist/process_group.h"

namespace braid::dist {

class SoloProcessGroup final : public ProcessGroup {
 public:
  explicit SoloProcessGroup(std::string name = "world");
  std::string backend() const override { return "solo"; }

  WorkPtr all_reduce(Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  WorkPtr all_gather(const Tensor& input, Tensor& output) override;
  WorkPtr broadcast(Tensor& tensor, int root) override;
  WorkPtr barrier() override;
  std::shared_ptr<ProcessGroup> split_by_color(int color, int key, std::string name) override;
};

}  // namespace braid::dist
