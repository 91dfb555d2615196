// CUDA AdamW: one thread per element, explicitly rounded operations in the CPU kernel's order;
// the grouped update reads its scale and skip flag from device memory (the device step).
#include "optim/adamw.cuh"

#include <algorithm>
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

// Tensors per launch of the device-scaled group update; their pointers and hyperparameters
// travel as one kernel argument (under the 4 KiB a launch may pass).
constexpr int kAdamWBatch = 24;

struct AdamWTensor {
  float *p, *m, *v;
  const float* g;
  int64_t n;
  int64_t step;  // the host's count, before the skips it has not seen
  float lr, beta1, beta2, eps, weight_decay;
};
struct AdamWBatch {
  AdamWTensor t[kAdamWBatch];
  int first_block[kAdamWBatch + 1];
  int count;
};

// Block b updates its part of its tensor. The per-tensor scalars are computed as
// adamw_scalars computes them on the host: the bias corrections come from the host's table
// (std::pow there), the rest is IEEE-rounded double or float arithmetic, so the update is
// bitwise adamw_kernel's with the same step.
__global__ void adamw_group_device_kernel(AdamWBatch batch, const float* record, const float* state,
                                          const double* bias, int64_t skip_base) {
  if (record[ops::kRecordSkip] != 0.0f) return;
  const int b = blockIdx.x;
  int k = 0;
  while (k + 1 < batch.count && batch.first_block[k + 1] <= b) ++k;
  const AdamWTensor& t = batch.t[k];
  const int64_t blocks = batch.first_block[k + 1] - batch.first_block[k];
  const int64_t step = t.step - (static_cast<int64_t>(state[ops::kStateSkipped]) - skip_base);
  const double bias1 = bias[2 * (step - 1)], bias2 = bias[2 * (step - 1) + 1];
  AdamWScalars s;
  s.beta1 = t.beta1;
  s.beta2 = t.beta2;
  s.one_minus_beta1 = __fsub_rn(1.0f, t.beta1);
  s.one_minus_beta2 = __fsub_rn(1.0f, t.beta2);
  s.eps = t.eps;
  s.decay = __fsub_rn(1.0f, __fmul_rn(t.lr, t.weight_decay));
  s.bias2_sqrt = static_cast<float>(sqrt(bias2));
  s.step_size = static_cast<float>(static_cast<double>(t.lr) / bias1);
  s.grad_scale = record[ops::kRecordScale];
  for (int64_t i = (b - batch.first_block[k]) * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < t.n; i += blocks * blockDim.x) {
    const float gi = __fmul_rn(t.g[i], s.grad_scale);
    const float mi = __fadd_rn(__fmul_rn(s.beta1, t.m[i]), __fmul_rn(s.one_minus_beta1, gi));
    const float vi =
        __fadd_rn(__fmul_rn(s.beta2, t.v[i]), __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
    t.m[i] = mi;
    t.v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias2_sqrt), s.eps);
    t.p[i] = __fsub_rn(__fmul_rn(t.p[i], s.decay), __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
  }
}

int adamw_blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(
      (n + 4 * kThreadsPerBlock - 1) / (4 * kThreadsPerBlock), 1, kMaxGridBlocks / kAdamWBatch));
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

void adamw_group_device(std::span<const ops::AdamWUpdate> updates, const Tensor& record,
                        const Tensor& state, const Tensor& bias, int64_t skip_base) {
  constexpr const char* kOp = "adamw_group_device";
  check_cuda_tensor(record, kOp, "record");
  check_cuda_tensor(state, kOp, "state");
  check_cuda_tensor(bias, kOp, "bias", DType::i64);
  check_same_device(state, record, kOp, "state", "record");
  check_same_device(bias, record, kOp, "bias", "record");
  BRAID_CHECK(record.numel() == ops::kStepRecord && state.numel() == ops::kStepState,
              "adamw_group_device (cuda): record {} and state {} must hold {} and {} elements",
              record.str(), state.str(), ops::kStepRecord, ops::kStepState);
  std::vector<const ops::AdamWUpdate*> live;
  for (const ops::AdamWUpdate& u : updates) {
    check_cuda_tensor(*u.param, kOp, "param");
    check_same_device(*u.param, record, kOp, "param", "record");
    check_contiguous(*u.param, kOp, "param");
    const std::pair<const Tensor*, const char*> others[] = {
        {u.grad, "grad"}, {u.exp_avg, "exp_avg"}, {u.exp_avg_sq, "exp_avg_sq"}};
    for (const auto& [t, role] : others) {
      check_cuda_tensor(*t, kOp, role);
      check_same_device(*t, *u.param, kOp, role, "param");
      check_contiguous(*t, kOp, role);
      check_shape(*t, u.param->shape(), kOp, role);
    }
    // The host's count is an upper bound of the step the device takes: the table must reach it.
    BRAID_CHECK(u.hyper.step >= 1 && 2 * u.hyper.step <= bias.numel(),
                "adamw_group_device (cuda): step {} is outside the bias table of {} steps",
                u.hyper.step, bias.numel() / 2);
    if (u.param->numel() > 0) live.push_back(&u);
  }
  if (live.empty()) return;
  DeviceGuard guard(record.device().index);
  cudaStream_t stream = current_stream();
  for (size_t begin = 0; begin < live.size(); begin += kAdamWBatch) {
    AdamWBatch batch{};
    batch.count = static_cast<int>(std::min<size_t>(kAdamWBatch, live.size() - begin));
    batch.first_block[0] = 0;
    for (int k = 0; k < batch.count; ++k) {
      const ops::AdamWUpdate& u = *live[begin + k];
      AdamWTensor& t = batch.t[k];
      t.p = static_cast<float*>(u.param->data_ptr());
      t.g = static_cast<const float*>(u.grad->data_ptr());
      t.m = static_cast<float*>(u.exp_avg->data_ptr());
      t.v = static_cast<float*>(u.exp_avg_sq->data_ptr());
      t.n = u.param->numel();
      t.step = u.hyper.step;
      t.lr = u.hyper.lr;
      t.beta1 = u.hyper.beta1;
      t.beta2 = u.hyper.beta2;
      t.eps = u.hyper.eps;
      t.weight_decay = u.hyper.weight_decay;
      batch.first_block[k + 1] = batch.first_block[k] + adamw_blocks(t.n);
    }
    adamw_group_device_kernel<<<batch.first_block[batch.count], kThreadsPerBlock, 0, stream>>>(
        batch, static_cast<const float*>(record.data_ptr()),
        static_cast<const float*>(state.data_ptr()), static_cast<const double*>(bias.data_ptr()),
        skip_base);
    BRAID_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace braid::cuda
