// CUDA binary elementwise op: a dense fast path and a strided path for broadcast views.
#include "elementwise/binary.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

using ops::BinaryOp;

template <BinaryOp Op>
__device__ __forceinline__ float apply(float a, float b) {
  if constexpr (Op == BinaryOp::add) return a + b;
  if constexpr (Op == BinaryOp::sub) return a - b;
  if constexpr (Op == BinaryOp::mul) return a * b;
  if constexpr (Op == BinaryOp::div) return a / b;
}

template <BinaryOp Op>
__global__ void binary_dense_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = apply<Op>(a[i], b[i]);
}

// Operand order in the layout: 0 = a, 1 = b, 2 = out.
template <BinaryOp Op>
__global__ void binary_strided_kernel(const float* a, const float* b, float* out,
                                      StridedLayout layout, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, oa = 0, ob = 0, oo = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      const int64_t idx = rest % layout.sizes[d];
      rest /= layout.sizes[d];
      oa += idx * layout.strides[0][d];
      ob += idx * layout.strides[1][d];
      oo += idx * layout.strides[2][d];
    }
    out[oo] = apply<Op>(a[oa], b[ob]);
  }
}

template <BinaryOp Op>
void launch_binary(const float* a, const float* b, float* out, const StridedLayout& layout,
                   cudaStream_t stream) {
  const int64_t n = layout.numel();
  const unsigned blocks = grid_1d(n);
  if (layout.dense()) {
    binary_dense_kernel<Op><<<blocks, kThreadsPerBlock, 0, stream>>>(a, b, out, n);
  } else {
    binary_strided_kernel<Op><<<blocks, kThreadsPerBlock, 0, stream>>>(a, b, out, layout, n);
  }
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  constexpr const char* kOp = "binary";
  check_cuda_tensor(a, kOp, "a");
  check_cuda_tensor(b, kOp, "b");
  check_cuda_tensor(out, kOp, "out");
  check_same_device(a, out, kOp, "a", "out");
  check_same_device(b, out, kOp, "b", "out");
  check_shape(a, out.shape(), kOp, "a (broadcast to out)");
  check_shape(b, out.shape(), kOp, "b (broadcast to out)");
  check_writable(out, kOp, "out");
  if (out.numel() == 0) return;
  const Shape* strides[] = {&a.strides(), &b.strides(), &out.strides()};
  const StridedLayout layout = collapse_layout(out.shape(), strides, 3);
  const auto* pa = static_cast<const float*>(a.data_ptr());
  const auto* pb = static_cast<const float*>(b.data_ptr());
  auto* po = static_cast<float*>(out.data_ptr());
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream();
  switch (op) {
    case BinaryOp::add:
      return launch_binary<BinaryOp::add>(pa, pb, po, layout, stream);
    case BinaryOp::sub:
      return launch_binary<BinaryOp::sub>(pa, pb, po, layout, stream);
    case BinaryOp::mul:
      return launch_binary<BinaryOp::mul>(pa, pb, po, layout, stream);
    case BinaryOp::div:
      return launch_binary<BinaryOp::div>(pa, pb, po, layout, stream);
  }
  BRAID_FAIL("binary (cuda): unknown op {}", static_cast<int>(op));
}

}  // namespace braid::cuda
