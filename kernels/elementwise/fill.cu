// CUDA fill kernel: one bit pattern written over a dense or strided tensor.
#include "elementwise/fill.cuh"

#include <cstdint>
#include <cstring>

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

template <class T>
__global__ void fill_dense_kernel(T* out, int64_t n, T pattern) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = pattern;
}

template <class T>
__global__ void fill_strided_kernel(T* out, StridedLayout layout, int64_t n, T pattern) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, offset = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      offset += (rest % layout.sizes[d]) * layout.strides[0][d];
      rest /= layout.sizes[d];
    }
    out[offset] = pattern;
  }
}

template <class T>
void launch_fill(void* out, const StridedLayout& layout, uint64_t bits, cudaStream_t stream) {
  const int64_t n = layout.numel();
  T pattern;
  std::memcpy(&pattern, &bits, sizeof(T));  // the low bytes: x86-64 and CUDA are little-endian
  if (layout.dense()) {
    fill_dense_kernel<T>
        <<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(static_cast<T*>(out), n, pattern);
  } else {
    fill_strided_kernel<T>
        <<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(static_cast<T*>(out), layout, n, pattern);
  }
  BRAID_CUDA_CHECK_LAUNCH();
}

// value as an element of dtype t, in the low bytes (little-endian): the CPU kernel's conversion.
uint64_t element_bits(float value, DType t) {
  uint64_t bits = 0;
  store_from_float(&bits, 0, t, value);
  return bits;
}

}  // namespace

void fill(float value, Tensor& out) {
  constexpr const char* kOp = "fill";
  BRAID_CHECK(out.defined(), "fill (cuda): out is an undefined tensor");
  check_cuda_tensor(out, kOp, "out", out.dtype());
  check_writable(out, kOp, "out");
  if (out.numel() == 0) return;
  const uint64_t bits = element_bits(value, out.dtype());
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream();
  if (out.dim() > kMaxDims) {
    // More dims than the kernels index: one outermost index at a time.
    const Shape inner(out.shape().begin() + 1, out.shape().end());
    const Shape strides(out.strides().begin() + 1, out.strides().end());
    for (int64_t i = 0; i < out.size(0); ++i) {
      Tensor row = out.alias(inner, strides, out.offset() + i * out.stride(0));
      fill(value, row);
    }
    return;
  }
  const Shape* strides[] = {&out.strides()};
  const StridedLayout layout = collapse_layout(out.shape(), strides, 1);
  if (bits == 0 && layout.dense()) {
    BRAID_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
    return;
  }
  switch (dtype_size(out.dtype())) {
    case 1:
      return launch_fill<uint8_t>(out.data_ptr(), layout, bits, stream);
    case 2:
      return launch_fill<uint16_t>(out.data_ptr(), layout, bits, stream);
    case 4:
      return launch_fill<uint32_t>(out.data_ptr(), layout, bits, stream);
    case 8:
      return launch_fill<uint64_t>(out.data_ptr(), layout, bits, stream);
  }
  BRAID_FAIL("fill (cuda): no element type of {} bytes", dtype_size(out.dtype()));
}

}  // namespace braid::cuda
