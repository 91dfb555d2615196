// SoloProcessGroup: collectives of a one-rank group are identities (or copies).
#include "braid/dist/solo_process_group.h"

namespace braid::dist {
namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
  std::exception_ptr error() const override { return nullptr; }
};

WorkPtr done() {
  return std::make_shared<DoneWork>();
}

}  // namespace

SoloProcessGroup::SoloProcessGroup(std::string name) : ProcessGroup(std::move(name), 0, 1, {0}) {}

WorkPtr SoloProcessGroup::all_reduce(Tensor&, ReduceOp) {
  return done();
}

WorkPtr SoloProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp) {
  BRAID_CHECK(input.numel() == output.numel(),
              "reduce_scatter on one rank: output {} must hold all of input {}", output.str(),
              input.str());
  output.copy_(input.reshape(output.shape()));
  return done();
}

WorkPtr SoloProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  BRAID_CHECK(input.numel() == output.numel(),
              "all_gather on one rank: output {} must equal input {}", output.str(), input.str());
  output.copy_(input.reshape(output.shape()));
  return done();
}

WorkPtr SoloProcessGroup::broadcast(Tensor&, int root) {
  BRAID_CHECK(root == 0, "broadcast root {} in a group of one rank", root);
  return done();
}

WorkPtr SoloProcessGroup::barrier() {
  return done();
}

std::shared_ptr<ProcessGroup> SoloProcessGroup::split_by_color(int color, int, std::string name) {
  if (color < 0) return nullptr;
  return std::make_shared<SoloProcessGroup>(std::move(name));
}

}  // namespace braid::dist
