// CUDA AdamW: one thread per element, explicitly rounded operations in the CPU kernel's order.
#include "optim/adamw.cuh"

#include <cmath>

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, AdamWScalars s,
                             int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = __fmul_rn(g[i], s.grad_scale);
    const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(s.one_minus_beta1, gi));
    const float vi =
        __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias2_sqrt), s.eps);
    p[i] = __fsub_rn(__fmul_rn(p[i], s.decay), __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
  }
}

void launch_adamw(float* p, const float* g, float* m, float* v, const AdamWScalars& s, int64_t n,
                  cudaStream_t stream) {
  adamw_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(p, g, m, v, s, n);
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

AdamWScalars adamw_scalars(const ops::AdamWHyper& hp, float grad_scale) {
  AdamWScalars s;
  s.beta1 = hp.beta1;
  s.beta2 = hp.beta2;
  s.one_minus_beta1 = 1.0f - hp.beta1;
  s.one_minus_beta2 = 1.0f - hp.beta2;
  s.eps = hp.eps;
  // Two statements so the product is rounded before the subtraction, as on the CPU.
  const float lr_decay = hp.lr * hp.weight_decay;
  s.decay = 1.0f - lr_decay;
  const double bias1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
  s.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  s.step_size = static_cast<float>(hp.lr / bias1);
  s.grad_scale = grad_scale;
  return s;
}

void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
           const ops::AdamWHyper& hyper, float grad_scale) {
  constexpr const char* kOp = "adamw";
  check_cuda_tensor(param, kOp, "param");
  const std::pair<const Tensor*, const char*> others[] = {
      {&grad, "grad"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}};
  check_contiguous(param, kOp, "param");
  for (const auto& [t, role] : others) {
    check_cuda_tensor(*t, kOp, role);
    check_same_device(*t, param, kOp, role, "param");
    check_contiguous(*t, kOp, role);
    check_shape(*t, param.shape(), kOp, role);
  }
  BRAID_CHECK(hyper.step >= 1, "adamw (cuda): step must be >= 1 (1-based, after increment), got {}",
              hyper.step);
  if (param.numel() == 0) return;
  DeviceGuard guard(param.device().index);
  launch_adamw(static_cast<float*>(param.data_ptr()), static_cast<const float*>(grad.data_ptr()),
               static_cast<float*>(exp_avg.data_ptr()), static_cast<float*>(exp_avg_sq.data_ptr()),
               adamw_scalars(hyper, grad_scale), param.numel(), current_stream());
}

void adamw_group(std::span<const ops::AdamWUpdate> updates, float grad_scale) {
  for (const ops::AdamWUpdate& u : updates)
    adamw(*u.param, *u.grad, *u.exp_avg, *u.exp_avg_sq, u.hyper, grad_scale);
}

}  // namespace braid::cuda
