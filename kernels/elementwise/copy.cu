// CUDA copy kernel: strided element copies of one dtype, and conversions between dtypes.
#include "elementwise/copy.cuh"

#include <algorithm>
#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// The element offsets of flat index i in operand 0 (dst) and operand 1 (src).
__device__ __forceinline__ void offsets_of(int64_t i, const StridedLayout& layout, int64_t& od,
                                           int64_t& os) {
  od = 0;
  os = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    const int64_t idx = i % layout.sizes[d];
    i /= layout.sizes[d];
    od += idx * layout.strides[0][d];
    os += idx * layout.strides[1][d];
  }
}

// One dtype: element bits are moved as an unsigned integer of the element's size.
template <class T>
__global__ void copy_strided_kernel(const T* src, T* dst, StridedLayout layout, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t od, os;
    offsets_of(i, layout, od, os);
    dst[od] = src[os];
  }
}

// Conversions go through braid/core/dtype.h's load_as_float / store_from_float, the host's own
// functions compiled for the device (the hardware's cvt instructions differ on NaN payloads).

// Two dtypes: i32 <-> i64 exactly (ids above 2^24 must not round through float), the rest
// through f32. The dtypes are uniform over the launch, so the switches never diverge.
__global__ void convert_strided_kernel(const void* src, DType st, void* dst, DType dt,
                                       StridedLayout layout, int64_t n) {
  const bool exact_ints =
      (dt == DType::i32 || dt == DType::i64) && (st == DType::i32 || st == DType::i64);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t od, os;
    offsets_of(i, layout, od, os);
    if (exact_ints) {
      const int64_t v = st == DType::i32 ? static_cast<const int32_t*>(src)[os]
                                         : static_cast<const int64_t*>(src)[os];
      if (dt == DType::i32)
        static_cast<int32_t*>(dst)[od] = static_cast<int32_t>(v);
      else
        static_cast<int64_t*>(dst)[od] = v;
    } else {
      store_from_float(dst, od, dt, load_as_float(src, os, st));
    }
  }
}

template <class T>
void launch_copy_strided(const void* src, void* dst, const StridedLayout& layout,
                         cudaStream_t stream) {
  const int64_t n = layout.numel();
  copy_strided_kernel<T><<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), layout, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_convert(const void* src, DType st, void* dst, DType dt, const StridedLayout& layout,
                    cudaStream_t stream) {
  const int64_t n = layout.numel();
  convert_strided_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(src, st, dst, dt, layout, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

// Dense bytes, memmove-like: cudaMemcpy leaves overlapping ranges undefined, so those go
// through a scratch copy.
void copy_dense_bytes(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  if (src == dst) return;
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  if (d < s + bytes && s < d + bytes) {
    ScratchBuffer staging(bytes, stream);
    BRAID_CUDA_CHECK(
        cudaMemcpyAsync(staging.as<char>(), s, bytes, cudaMemcpyDeviceToDevice, stream));
    BRAID_CUDA_CHECK(
        cudaMemcpyAsync(d, staging.as<char>(), bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  BRAID_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, stream));
}

void copy_launch(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  const Shape* strides[] = {&dst.strides(), &src.strides()};
  const StridedLayout layout = collapse_layout(dst.shape(), strides, 2);
  const void* ps = src.data_ptr();
  void* pd = dst.data_ptr();
  if (src.dtype() != dst.dtype())
    return launch_convert(ps, src.dtype(), pd, dst.dtype(), layout, stream);
  if (layout.dense()) return copy_dense_bytes(ps, pd, dst.nbytes(), stream);
  switch (dtype_size(dst.dtype())) {
    case 1:
      return launch_copy_strided<uint8_t>(ps, pd, layout, stream);
    case 2:
      return launch_copy_strided<uint16_t>(ps, pd, layout, stream);
    case 4:
      return launch_copy_strided<uint32_t>(ps, pd, layout, stream);
    case 8:
      return launch_copy_strided<uint64_t>(ps, pd, layout, stream);
  }
  BRAID_FAIL("copy (cuda): no element type of {} bytes", dtype_size(dst.dtype()));
}

// Views of more dims than the kernels index are copied one outermost index at a time.
void copy_any_rank(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  if (dst.dim() <= kMaxDims) return copy_launch(src, dst, stream);
  const Shape inner(dst.shape().begin() + 1, dst.shape().end());
  const Shape dst_strides(dst.strides().begin() + 1, dst.strides().end());
  const Shape src_strides(src.strides().begin() + 1, src.strides().end());
  for (int64_t i = 0; i < dst.size(0); ++i) {
    Tensor d = dst.alias(inner, dst_strides, dst.offset() + i * dst.stride(0));
    copy_any_rank(src.alias(inner, src_strides, src.offset() + i * src.stride(0)), d, stream);
  }
}

}  // namespace

void copy(const Tensor& src, Tensor& dst) {
  constexpr const char* kOp = "copy";
  BRAID_CHECK(src.defined() && dst.defined(), "copy (cuda): undefined tensor");
  check_cuda_tensor(src, kOp, "src", src.dtype());
  check_cuda_tensor(dst, kOp, "dst", dst.dtype());
  check_same_device(src, dst, kOp, "src", "dst");
  check_shape(src, dst.shape(), kOp, "src");
  check_writable(dst, kOp, "dst");
  if (dst.numel() == 0) return;
  DeviceGuard guard(dst.device().index);
  copy_any_rank(src, dst, current_stream());
}

}  // namespace braid::cuda
