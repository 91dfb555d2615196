// Tensor: a shared handle to a strided view of a Storage, plus its autograd state.
//
// Copying a Tensor copies the handle (both copies see the same data and grad). Views
// (reshape, transpose, narrow, ...) share storage; kernels that need a dense layout call
// contiguous(), which returns the tensor itself when it already is.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "braid/core/device.h"
#include "braid/core/dtype.h"
#include "braid/core/error.h"
#include "braid/core/storage.h"

namespace braid {

namespace autograd {
class Node;
}

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::bf16;
}  // raw 16-bit storage

struct TensorImpl;
class Tensor;

// Called with a parameter once its gradient for the current backward pass is final.
using GradReadyHook = std::function<void(Tensor&)>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories -------------------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = {});
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = {});
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32, Device device = {});
  // The values are copied from the host; on a device that is one host-to-device copy.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            Device device = {});
  static Tensor from_vector(const std::vector<int32_t>& values, const Shape& shape,
                            Device device = {});
  // Wraps existing storage (an mmap'ed file, a parent buffer) without copying.
  static Tensor from_storage(StoragePtr storage, const Shape& shape, DType dtype,
                             int64_t offset = 0);

  // ---- metadata --------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t stride(int dim) const;
  int dim() const;
  int64_t numel() const;
  int64_t offset() const;  // in elements, into the storage
  DType dtype() const;
  Device device() const;
  const StoragePtr& storage() const;
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  int normalize_dim(int dim) const;  // checks range, maps negatives
  std::string str() const;           // "f32[2, 3]" for messages

  // ---- raw data --------------------------------------------------------------------------
  void* data_ptr() const;  // first element of the view
  template <class T>
  T* data() const {
    BRAID_CHECK(dtype() == dtype_of<T>(), "tensor {} accessed as {}", str(),
                dtype_name(dtype_of<T>()));
    return static_cast<T*>(data_ptr());
  }
  // Values read on the host: any dtype, layout and device (a device tensor is copied over
  // once, which waits for the device work that produces it).
  float item() const;                    // single-element tensor as float
  std::vector<float> to_vector() const;  // -> dense f32 values in row-major order

  // ---- non-differentiable helpers ----------------------------------------------------------
  // A new view of the same storage; no autograd edge. The differentiable views live in
  // braid/ops (reshape, transpose, narrow, ...) and are also reachable as methods below.
  Tensor alias(const Shape& shape, const Shape& strides, int64_t offset) const;
  Tensor detach() const;           // same data, no grad history
  Tensor clone() const;            // dense copy, no grad history
  Tensor to(DType dtype) const;    // dense converted copy (same dtype: dense copy)
  Tensor to(Device device) const;  // dense copy on another device (any layout)
  // Elementwise copy with dtype conversion; shapes must match. Any layouts, dtypes and devices:
  // within a device its copy kernel runs, between devices dense bytes move (staged through a
  // dense copy on the side that is strided or of the other dtype).
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(float value);  // on a device, its fill kernel
  // Copies this tensor's values into `view` (same shape and dtype) and makes every handle of
  // this tensor use view's memory from then on: how parameters move into flat buffers.
  Tensor& rebind_(const Tensor& view);
  Tensor& zero_() { return fill_(0.0f); }

  // ---- differentiable views (forward to braid/ops) -----------------------------------------
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int a, int b) const;
  Tensor permute(const std::vector<int>& order) const;
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor contiguous() const;

  // ---- autograd --------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool enabled);
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward pass reaches this leaf
  void set_grad(const Tensor& grad);
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  void set_history(std::shared_ptr<autograd::Node> fn, uint32_t output_nr);
  void add_grad_ready_hook(GradReadyHook hook);
  // Runs backward from this tensor; `gradient` defaults to ones for a scalar.
  void backward(const Tensor& gradient = {}) const;

  const std::string& name() const;
  Tensor& set_name(std::string name);

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

// Clones of many tensors at once (snapshots of a model's state): the copies are spread over
// the OpenMP threads, whole tensors per thread, where cloning one by one would leave every
// tensor too small to split on one thread. Same order as `tensors`.
std::vector<Tensor> clone_all(const std::vector<Tensor>& tensors);

struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  Tensor grad;
  // zero_grad deferred its fill (autograd::zero_grad): `grad` holds stale values to be read as
  // zeros. Tensor::grad() fills them on the first read; a backward GEMM overwrites them.
  bool grad_stale = false;
  std::weak_ptr<autograd::Node> accumulator;  // a leaf's AccumulateGrad node, made on demand
  std::vector<GradReadyHook> grad_ready_hooks;
};

struct TensorImpl {
  StoragePtr storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  std::string name;
  std::unique_ptr<AutogradMeta> autograd;  // allocated when grad state is first touched

  AutogradMeta& meta() {
    if (!autograd) autograd = std::make_unique<AutogradMeta>();
    return *autograd;
  }
};

}  // namespace braid
