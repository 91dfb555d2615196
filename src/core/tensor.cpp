// Tensor metadata, factories, and the copies and fills that dispatch to a device's kernels.
#include "braid/core/tensor.h"

#include <algorithm>
#include <cstring>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/core/allocator.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/views.h"
#include "ops/cpu/cpu_kernels.h"

namespace braid {

std::string shape_str(const Shape& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    BRAID_CHECK(d >= 0, "negative dimension in shape {}", shape_str(s));
    n *= d;
  }
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape strides(s.size());
  int64_t acc = 1;
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    strides[d] = acc;
    acc *= std::max<int64_t>(s[d], 1);
  }
  return strides;
}

TensorImpl& Tensor::checked() const {
  BRAID_CHECK(impl_ != nullptr, "use of an undefined tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(bytes, device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (!device.is_cpu())
    t.fill_(0.0f);  // device memory is the device's to write
  else if (t.nbytes())
    std::memset(t.data_ptr(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

namespace {

// A host tensor of `values`, then one copy to `device` when that is not the host.
template <class T>
Tensor tensor_of(const std::vector<T>& values, const Shape& shape, Device device) {
  BRAID_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              "{} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), t.nbytes());
  return device.is_cpu() ? t : t.to(device);
}

}  // namespace

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, Device device) {
  return tensor_of(values, shape, device);
}

Tensor Tensor::from_vector(const std::vector<int32_t>& values, const Shape& shape, Device device) {
  return tensor_of(values, shape, device);
}

Tensor Tensor::from_storage(StoragePtr storage, const Shape& shape, DType dtype, int64_t offset) {
  BRAID_CHECK(
      static_cast<size_t>(offset + shape_numel(shape)) * dtype_size(dtype) <= storage->bytes(),
      "view {} {} at offset {} exceeds its storage of {} bytes", dtype_name(dtype),
      shape_str(shape), offset, storage->bytes());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

const Shape& Tensor::shape() const {
  return checked().shape;
}
const Shape& Tensor::strides() const {
  return checked().strides;
}
int Tensor::dim() const {
  return static_cast<int>(checked().shape.size());
}
int64_t Tensor::numel() const {
  return shape_numel(checked().shape);
}
int64_t Tensor::offset() const {
  return checked().offset;
}
DType Tensor::dtype() const {
  return checked().dtype;
}
Device Tensor::device() const {
  return checked().storage->device();
}
const StoragePtr& Tensor::storage() const {
  return checked().storage;
}

int Tensor::normalize_dim(int d) const {
  const int n = dim();
  BRAID_CHECK(d >= -n && d < n, "dimension {} out of range for tensor {}", d, str());
  return d < 0 ? d + n : d;
}

int64_t Tensor::size(int d) const {
  return shape()[normalize_dim(d)];
}
int64_t Tensor::stride(int d) const {
  return strides()[normalize_dim(d)];
}

bool Tensor::is_contiguous() const {
  const auto& impl = checked();
  int64_t expected = 1;
  for (int d = static_cast<int>(impl.shape.size()) - 1; d >= 0; --d) {
    if (impl.shape[d] == 1) continue;
    if (impl.strides[d] != expected) return false;
    expected *= impl.shape[d];
  }
  return true;
}

std::string Tensor::str() const {
  if (!impl_) return "undefined";
  return fmt::format("{}{}", dtype_name(impl_->dtype), shape_str(impl_->shape));
}

void* Tensor::data_ptr() const {
  const auto& impl = checked();
  return static_cast<char*>(impl.storage->data()) + impl.offset * dtype_size(impl.dtype);
}

float Tensor::item() const {
  BRAID_CHECK(numel() == 1, "item() needs a single-element tensor, got {}", str());
  return to_vector()[0];
}

std::vector<float> Tensor::to_vector() const {
  // A device tensor comes over in one copy (which waits for the work that produces it).
  const Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  Tensor dense = host.to(DType::f32);
  const float* p = dense.data<float>();
  return std::vector<float>(p, p + dense.numel());
}

Tensor Tensor::alias(const Shape& shape, const Shape& strides, int64_t offset) const {
  const auto& src = checked();
  BRAID_CHECK(shape.size() == strides.size(), "alias: shape {} and strides {} differ in rank",
              shape_str(shape), shape_str(strides));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = src.storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = src.dtype;
  impl->name = src.name;
  return Tensor(std::move(impl));
}

Tensor Tensor::detach() const {
  const auto& src = checked();
  return alias(src.shape, src.strides, src.offset);
}

Tensor Tensor::to(Device target) const {
  Tensor out = empty(shape(), dtype(), target);
  out.copy_(*this);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

std::vector<Tensor> clone_all(const std::vector<Tensor>& tensors) {
  // Tensors large enough to split are copied one at a time over all threads (copy_bytes);
  // the rest, one per thread at a time. Allocation stays on this thread.
  constexpr size_t kSplitBytes = size_t{8} << 20;
  std::vector<Tensor> out(tensors.size());
  std::vector<int64_t> small;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    out[i] = Tensor::empty(t.shape(), t.dtype(), t.device());
    if (t.nbytes() >= kSplitBytes || !t.device().is_cpu())
      out[i].copy_(t);
    else
      small.push_back(static_cast<int64_t>(i));
  }
  const int64_t n = static_cast<int64_t>(small.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t k = 0; k < n; ++k) out[small[k]].copy_(tensors[small[k]]);
  return out;
}

Tensor Tensor::to(DType target) const {
  Tensor out = empty(shape(), target, device());
  out.copy_(*this);
  return out;
}

namespace {

// DeviceMemoryOps moves dense bytes of one dtype, so a copy between devices converts and
// densifies on the source's device first, and scatters into a strided destination on the
// destination's device afterwards (one staging copy per side that needs it).
void copy_across_devices(const Tensor& src, Tensor& dst) {
  const Tensor from = src.is_contiguous() && src.dtype() == dst.dtype() ? src : src.to(dst.dtype());
  Tensor into = dst.is_contiguous() ? dst : Tensor::empty(dst.shape(), dst.dtype(), dst.device());
  const DeviceKind kind = dst.device().is_cpu() ? src.device().kind : dst.device().kind;
  device_memory(kind).copy(into.data_ptr(), into.device(), from.data_ptr(), from.device(),
                           into.nbytes());
  if (!into.same(dst)) dst.copy_(into);
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  BRAID_CHECK(shape() == src.shape(), "copy_: destination {} and source {} differ in shape", str(),
              src.str());
  if (numel() == 0) return *this;
  const Device dst_device = device(), src_device = src.device();
  if (dst_device != src_device) {
    copy_across_devices(src, *this);
  } else if (dst_device.is_cpu()) {
    ops::cpu::copy(src, *this);  // called directly: host copies take no table lookup
  } else {
    ops::kernel<ops::CopyKernel>(dst_device)(src, *this);
  }
  return *this;
}

Tensor& Tensor::fill_(float value) {
  if (device().is_cpu()) {
    ops::cpu::fill(value, *this);
  } else if (numel() > 0) {
    ops::kernel<ops::FillKernel>(device())(value, *this);
  }
  return *this;
}

Tensor& Tensor::rebind_(const Tensor& view) {
  BRAID_CHECK(view.shape() == shape() && view.dtype() == dtype(),
              "rebind_ of {} onto {}: shapes and dtypes must match", str(), view.str());
  Tensor(view).copy_(*this);
  TensorImpl& impl = checked();
  impl.storage = view.storage();
  impl.strides = view.strides();
  impl.offset = view.offset();
  return *this;
}

Tensor Tensor::reshape(const Shape& s) const {
  return braid::reshape(*this, s);
}
Tensor Tensor::transpose(int a, int b) const {
  return braid::transpose(*this, a, b);
}
Tensor Tensor::permute(const std::vector<int>& order) const {
  return braid::permute(*this, order);
}
Tensor Tensor::narrow(int d, int64_t start, int64_t length) const {
  return braid::narrow(*this, d, start, length);
}
Tensor Tensor::contiguous() const {
  return braid::contiguous(*this);
}

bool Tensor::requires_grad() const {
  const auto& impl = checked();
  return impl.autograd && impl.autograd->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool enabled) {
  BRAID_CHECK(is_leaf() || enabled, "cannot clear requires_grad on a non-leaf tensor {}", str());
  BRAID_CHECK(!enabled || is_floating(dtype()), "only floating tensors can require grad, got {}",
              str());
  checked().meta().requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const {
  const auto& impl = checked();
  return !impl.autograd || !impl.autograd->grad_fn;
}

Tensor Tensor::grad() const {
  const auto& impl = checked();
  if (!impl.autograd) return Tensor();
  AutogradMeta& meta = *impl.autograd;
  if (meta.grad_stale) {  // a deferred zero_grad, filled by its first reader
    meta.grad.zero_();
    meta.grad_stale = false;
  }
  return meta.grad;
}

void Tensor::set_grad(const Tensor& grad) {
  BRAID_CHECK(!grad.defined() || grad.shape() == shape(), "grad {} does not match tensor {}",
              grad.str(), str());
  AutogradMeta& meta = checked().meta();
  meta.grad = grad;
  meta.grad_stale = false;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  const auto& impl = checked();
  return impl.autograd ? impl.autograd->grad_fn : kNone;
}

uint32_t Tensor::output_nr() const {
  const auto& impl = checked();
  return impl.autograd ? impl.autograd->output_nr : 0;
}

void Tensor::set_history(std::shared_ptr<autograd::Node> fn, uint32_t nr) {
  auto& meta = checked().meta();
  meta.requires_grad = true;
  meta.grad_fn = std::move(fn);
  meta.output_nr = nr;
}

void Tensor::add_grad_ready_hook(GradReadyHook hook) {
  BRAID_CHECK(is_leaf(), "grad-ready hooks attach to leaf tensors; {} has history", str());
  checked().meta().grad_ready_hooks.push_back(std::move(hook));
}

void Tensor::backward(const Tensor& gradient) const {
  autograd::backward({*this}, {gradient});
}

const std::string& Tensor::name() const {
  return checked().name;
}
Tensor& Tensor::set_name(std::string name) {
  checked().name = std::move(name);
  return *this;
}

}  // namespace braid
