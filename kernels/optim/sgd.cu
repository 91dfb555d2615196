// CUDA SGD with momentum: one thread per element, explicitly rounded operations.
#include "optim/sgd.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// buf is null without momentum.
__global__ void sgd_kernel(float* p, const float* g, float* buf, float lr, float momentum,
                           float weight_decay, float grad_scale, bool first_step, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float d = __fadd_rn(__fmul_rn(g[i], grad_scale), __fmul_rn(weight_decay, p[i]));
    if (buf != nullptr) {
      buf[i] = first_step ? d : __fadd_rn(__fmul_rn(momentum, buf[i]), d);
      d = buf[i];
    }
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
  }
}

void launch_sgd(float* p, const float* g, float* buf, float lr, float momentum, float weight_decay,
                float grad_scale, bool first_step, int64_t n, cudaStream_t stream) {
  sgd_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(p, g, buf, lr, momentum, weight_decay,
                                                          grad_scale, first_step, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sgd(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
         float weight_decay, float grad_scale, bool first_step) {
  constexpr const char* kOp = "sgd";
  check_cuda_tensor(param, kOp, "param");
  check_dense_like(grad, param, kOp, "grad", "param");
  check_contiguous(param, kOp, "param");
  float* buf = nullptr;
  if (momentum != 0.0f) {
    check_dense_like(momentum_buf, param, kOp, "momentum_buf", "param");
    buf = static_cast<float*>(momentum_buf.data_ptr());
  }
  if (param.numel() == 0) return;
  DeviceGuard guard(param.device().index);
  launch_sgd(static_cast<float*>(param.data_ptr()), static_cast<const float*>(grad.data_ptr()), buf,
             lr, momentum, weight_decay, grad_scale, first_step, param.numel(), current_stream());
}

}  // namespace braid::cuda
