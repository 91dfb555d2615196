// Tensor metadata, factories, dense copies and dtype conversion on the host.
#include "braid/core/tensor.h"

#include <omp.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/core/allocator.h"
#include "braid/ops/views.h"
#include "core/strided.h"

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
  if (t.nbytes()) std::memset(t.data_ptr(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  BRAID_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              "{} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor t = empty(shape, DType::f32);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_vector(const std::vector<int32_t>& values, const Shape& shape) {
  BRAID_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              "{} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor t = empty(shape, DType::i32);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), t.nbytes());
  return t;
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
  BRAID_CHECK(device().is_cpu(), "to_vector() reads host tensors; {} is on {}", str(),
              device().str());
  Tensor dense = to(DType::f32);
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
  out.copy_(is_contiguous() ? *this : clone());  // clone: dense on the source device
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

// Reads element i of a row of any dtype as float / writes a float as any dtype.
float load_as_float(const void* base, int64_t i, DType t) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    case DType::i64:
      return static_cast<float>(static_cast<const int64_t*>(base)[i]);
    case DType::u8:
      return static_cast<float>(static_cast<const uint8_t*>(base)[i]);
  }
  return 0;
}

void store_from_float(void* base, int64_t i, DType t, float v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(base)[i] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
      break;
    case DType::f16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(v);
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DType::i64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
  }
}

// Dense bytes from src to dst. A large copy is split over the OpenMP threads: one thread's
// memcpy reached 7-9 GB/s on these machines and two together 28 GB/s, and the large dense
// copies (checkpoint snapshots, an overlapped window's gradients) happen while the training
// threads wait for them. Overlapping ranges keep memmove's single pass.
void copy_bytes(void* dst, const void* src, size_t n) {
  constexpr size_t kParallelBytes = size_t{1} << 20;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const bool overlap = d < s + n && s < d + n;
  if (n < kParallelBytes || overlap || omp_in_parallel() || omp_get_max_threads() == 1) {
    std::memmove(dst, src, n);
    return;
  }
#pragma omp parallel
  {
    const size_t nt = static_cast<size_t>(omp_get_num_threads());
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    // Cache-line boundaries, so no two threads write one line.
    const size_t begin = n * t / nt / 64 * 64, end = t + 1 == nt ? n : n * (t + 1) / nt / 64 * 64;
    std::memcpy(d + begin, s + begin, end - begin);
  }
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  BRAID_CHECK(shape() == src.shape(), "copy_: destination {} and source {} differ in shape", str(),
              src.str());
  const int64_t n = numel();
  if (n == 0) return *this;
  if (!device().is_cpu() || !src.device().is_cpu()) {
    // Device copies move dense bytes; layout or dtype changes happen on the host side.
    BRAID_CHECK(dtype() == src.dtype() && is_contiguous() && src.is_contiguous(),
                "copy_ from {} on {} to {} on {} needs dense tensors of one dtype", src.str(),
                src.device().str(), str(), device().str());
    const DeviceKind kind = device().is_cpu() ? src.device().kind : device().kind;
    device_memory(kind).copy(data_ptr(), device(), src.data_ptr(), src.device(), nbytes());
    return *this;
  }
  const DType dt = dtype(), st = src.dtype();
  const size_t es = dtype_size(dt);
  if (dt == st && is_contiguous() && src.is_contiguous()) {
    copy_bytes(data_ptr(), src.data_ptr(), nbytes());
    return *this;
  }
  // Integer-to-integer copies must not round through float (i64 ids above 2^24).
  const bool exact_ints =
      (dt == DType::i32 || dt == DType::i64) && (st == DType::i32 || st == DType::i64);
  const Shape& sh = shape();
  const int64_t rows = detail::num_rows(sh), len = detail::row_length(sh);
  const int64_t dst_inner = sh.empty() ? 1 : strides().back();
  const int64_t src_inner = sh.empty() ? 1 : src.strides().back();
  char* dst_base = static_cast<char*>(storage()->data());
  const char* src_base = static_cast<const char*>(src.storage()->data());
  const size_t ss = dtype_size(st);
  const Shape& ds = strides();
  const Shape& sst = src.strides();
  const int64_t doff0 = offset(), soff0 = src.offset();
#pragma omp parallel if (n > (1 << 16))
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    detail::for_each_row<2>(sh, {&ds, &sst}, r0, r1, [&](int64_t, int64_t doff, int64_t soff) {
      char* d = dst_base + (doff0 + doff) * es;
      const char* s = src_base + (soff0 + soff) * ss;
      if (dt == st && dst_inner == 1 && src_inner == 1) {
        std::memcpy(d, s, len * es);
      } else if (dt == st) {
        for (int64_t i = 0; i < len; ++i)
          std::memcpy(d + i * dst_inner * es, s + i * src_inner * ss, es);
      } else if (exact_ints) {
        for (int64_t i = 0; i < len; ++i) {
          const int64_t v = st == DType::i32 ? reinterpret_cast<const int32_t*>(s)[i * src_inner]
                                             : reinterpret_cast<const int64_t*>(s)[i * src_inner];
          if (dt == DType::i32)
            reinterpret_cast<int32_t*>(d)[i * dst_inner] = static_cast<int32_t>(v);
          else
            reinterpret_cast<int64_t*>(d)[i * dst_inner] = v;
        }
      } else {
        for (int64_t i = 0; i < len; ++i)
          store_from_float(d, i * dst_inner, dt, load_as_float(s, i * src_inner, st));
      }
    });
  }
  return *this;
}

namespace {

// Writes `value` to p[0, n) with non-temporal stores, which go to memory without first reading
// each cache line (an ordinary store loads the line before overwriting it).
void stream_fill(float* p, int64_t n, float value) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i < n && reinterpret_cast<uintptr_t>(p + i) % 16 != 0; ++i) p[i] = value;
  const __m128 v = _mm_set1_ps(value);
  for (; i + 4 <= n; i += 4) _mm_stream_ps(p + i, v);
  _mm_sfence();  // streamed stores are weakly ordered: publish them before the thread moves on
#endif
  for (; i < n; ++i) p[i] = value;
}

// Dense f32 fill. Buffers past the caches are streamed: zero_grad of a 124M-parameter model
// writes 497 MB, which took 27 ms on two threads here with ordinary stores and 13-14 ms streamed.
void fill_dense_f32(float* p, int64_t n, float value) {
  constexpr int64_t kStreamFrom = (8 << 20) / sizeof(float);
  if (n < kStreamFrom) {
#pragma omp parallel for if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] = value;
    return;
  }
  constexpr int64_t kBlock = 1 << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b)
    stream_fill(p + b * kBlock, std::min(kBlock, n - b * kBlock), value);
}

}  // namespace

Tensor& Tensor::fill_(float value) {
  BRAID_CHECK(device().is_cpu(), "fill_ on {} needs the CUDA runtime", device().str());
  if (is_contiguous() && dtype() == DType::f32) {
    fill_dense_f32(data<float>(), numel(), value);
    return *this;
  }
  Tensor one = empty({}, dtype());
  store_from_float(one.data_ptr(), 0, dtype(), value);
  // Broadcast the scalar over every element through a zero-stride view.
  return copy_(one.alias(shape(), Shape(dim(), 0), 0));
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
