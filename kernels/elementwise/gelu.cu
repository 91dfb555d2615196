// CUDA GELU (tanh approximation): one thread per element, the CPU kernel's formula.
#include "elementwise/gelu.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

__global__ void gelu_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(inner));
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    const float t = tanhf(inner);
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  }
}

void launch_gelu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(x, y, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_gelu_backward(const float* x, const float* dy, float* dx, int64_t n,
                          cudaStream_t stream) {
  gelu_backward_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(x, dy, dx, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  constexpr const char* kOp = "gelu_forward";
  check_cuda_tensor(x, kOp, "x");
  check_dense_like(y, x, kOp, "y", "x");
  check_contiguous(x, kOp, "x");
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  launch_gelu_forward(static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()),
                      x.numel(), current_stream());
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  constexpr const char* kOp = "gelu_backward";
  check_cuda_tensor(x, kOp, "x");
  check_dense_like(dy, x, kOp, "dy", "x");
  check_dense_like(dx, x, kOp, "dx", "x");
  check_contiguous(x, kOp, "x");
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  launch_gelu_backward(static_cast<const float*>(x.data_ptr()),
                       static_cast<const float*>(dy.data_ptr()), static_cast<float*>(dx.data_ptr()),
                       x.numel(), current_stream());
}

}  // namespace braid::cuda
