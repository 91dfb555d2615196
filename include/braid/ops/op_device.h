// The device an op runs on: taken once from its inputs, where every tensor it allocates goes.
//
// Inputs on two different devices are one error naming the op, both inputs and both devices
// ("matmul: a is on cuda:0 but b is on cpu; move both to one device with .to(...)"), thrown
// before any kernel could read memory of the wrong device. Ops allocate through OpDevice
// rather than Tensor::empty, so an output can not land on the host by a forgotten argument.
#pragma once

#include <initializer_list>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::ops {

// One input of an op: its name in messages ("a", "weight") and the tensor. Undefined tensors
// (an absent bias) take no part.
struct OpInput {
  const char* role;
  const Tensor& tensor;
};

class OpDevice {
 public:
  // The one device of `inputs` (the host when none is defined).
  OpDevice(const char* op, std::initializer_list<OpInput> inputs);
  // The one device of every tensor in `inputs`, named "<role> 0", "<role> 1", ... in messages.
  OpDevice(const char* op, const std::vector<Tensor>& inputs, const char* role);

  Device device() const { return device_; }
  bool is_cpu() const { return device_.is_cpu(); }
  Tensor empty(const Shape& shape, DType dtype = DType::f32) const {
    return Tensor::empty(shape, dtype, device_);
  }
  Tensor zeros(const Shape& shape, DType dtype = DType::f32) const {
    return Tensor::zeros(shape, dtype, device_);
  }
  // `t` itself when it already lives here, else a copy here (tensors an op builds on the host,
  // such as index lists, that a device kernel reads).
  Tensor place(const Tensor& t) const { return t.device() == device_ ? t : t.to(device_); }

 private:
  Device device_;
};

}  // namespace braid::ops
