// OpDevice: the common device of an op's inputs, and the one message for inputs that differ.
#include "braid/ops/op_device.h"

#include <string>

namespace braid::ops {
namespace {

[[noreturn]] void mismatch(const char* op, const std::string& first_role, Device first,
                           const std::string& role, Device other) {
  BRAID_FAIL("{}: {} is on {} but {} is on {}; move both to one device with .to(...)", op,
             first_role, first.str(), role, other.str());
}

}  // namespace

OpDevice::OpDevice(const char* op, std::initializer_list<OpInput> inputs) {
  const OpInput* first = nullptr;
  for (const OpInput& in : inputs) {
    if (!in.tensor.defined()) continue;
    if (first == nullptr) {
      first = &in;
      device_ = in.tensor.device();
    } else if (in.tensor.device() != device_) {
      mismatch(op, first->role, device_, in.role, in.tensor.device());
    }
  }
}

OpDevice::OpDevice(const char* op, const std::vector<Tensor>& inputs, const char* role) {
  size_t first = inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (first == inputs.size()) {
      first = i;
      device_ = inputs[i].device();
    } else if (inputs[i].device() != device_) {
      mismatch(op, fmt::format("{} {}", role, first), device_, fmt::format("{} {}", role, i),
               inputs[i].device());
    }
  }
}

}  // namespace braid::ops
