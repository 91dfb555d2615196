// CUDA row softmax: one block per row, max / sum / dot reduced with warp shuffles.
#include "norm/softmax.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Same three passes as the CPU kernel: max, exponentials and their sum, scale by 1 / sum.
// Each thread rescales exactly the entries it wrote, so the last pass needs no barrier.
__global__ void softmax_forward_kernel(const float* x, float* y, int64_t cols) {
  const float* in = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) mx = fmaxf(mx, in[i]);
  mx = block_max(mx);
  float total = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float e = expf(in[i] - mx);
    out[i] = e;
    total += e;
  }
  total = block_sum(total);
  const float inv = 1.0f / total;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[i] *= inv;
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t cols) {
  const int64_t base = blockIdx.x * cols;
  float dot = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dot += y[base + i] * dy[base + i];
  dot = block_sum(dot);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    dx[base + i] = y[base + i] * (dy[base + i] - dot);
}

void launch_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  softmax_forward_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0, stream>>>(x, y,
                                                                                              cols);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
  softmax_backward_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0, stream>>>(
      y, dy, dx, cols);
  BRAID_CUDA_CHECK_LAUNCH();
}

// rows x cols of a dense tensor whose last dim is the softmax dim.
std::pair<int64_t, int64_t> rows_cols(const Tensor& t, const char* op) {
  BRAID_CHECK(t.dim() >= 1, "{} (cuda): needs at least one dim, got {}", op, t.str());
  const int64_t cols = t.size(-1);
  const int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  check_fits_int(rows, op, "rows (grid size)");
  return {rows, cols};
}

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y) {
  constexpr const char* kOp = "softmax_forward";
  check_cuda_tensor(x, kOp, "x");
  check_dense_like(y, x, kOp, "y", "x");
  check_contiguous(x, kOp, "x");
  const auto [rows, cols] = rows_cols(x, kOp);
  if (rows == 0) return;
  DeviceGuard guard(x.device().index);
  launch_softmax_forward(static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()),
                         rows, cols, current_stream());
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  constexpr const char* kOp = "softmax_backward";
  check_cuda_tensor(y, kOp, "y");
  check_dense_like(dy, y, kOp, "dy", "y");
  check_dense_like(dx, y, kOp, "dx", "y");
  check_contiguous(y, kOp, "y");
  const auto [rows, cols] = rows_cols(y, kOp);
  if (rows == 0) return;
  DeviceGuard guard(y.device().index);
  launch_softmax_backward(static_cast<const float*>(y.data_ptr()),
                          static_cast<const float*>(dy.data_ptr()),
                          static_cast<float*>(dx.data_ptr()), rows, cols, current_stream());
}

}  // namespace braid::cuda
