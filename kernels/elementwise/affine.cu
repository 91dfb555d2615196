// CUDA affine map out = alpha * x + beta (scaling gradients, adding constants).
#include "elementwise/affine.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

__global__ void affine_kernel(const float* x, float alpha, float beta, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = alpha * x[i] + beta;
}

void launch_affine(const float* x, float alpha, float beta, float* out, int64_t n,
                   cudaStream_t stream) {
  affine_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(x, alpha, beta, out, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

void affine(const Tensor& x, float alpha, float beta, Tensor& out) {
  constexpr const char* kOp = "affine";
  check_cuda_tensor(x, kOp, "x");
  check_cuda_tensor(out, kOp, "out");
  check_same_device(x, out, kOp, "x", "out");
  check_contiguous(x, kOp, "x");
  check_contiguous(out, kOp, "out");
  BRAID_CHECK(x.numel() == out.numel(), "affine (cuda): x {} and out {} differ in size", x.str(),
              out.str());
  if (x.numel() == 0) return;
  DeviceGuard guard(out.device().index);
  launch_affine(static_cast<const float*>(x.data_ptr()), alpha, beta,
                static_cast<float*>(out.data_ptr()), x.numel(), current_stream());
}

}  // namespace braid::cuda
