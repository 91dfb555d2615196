// CUDA AdamW update, bitwise identical to the CPU kernel (checkpoint replay depends on it).
#pragma once

#include "braid/ops/kernel_signatures.h"

namespace braid::cuda {

// The per-step scalars of the update, computed on the host exactly as the CPU kernel computes
// them (bias corrections in double, rounded once), so both paths feed the same floats into the
// same per-element operations.
struct AdamWScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float decay;       // 1 - lr * weight_decay
  float step_size;   // lr / (1 - beta1^step)
  float bias2_sqrt;  // sqrt(1 - beta2^step)
  float grad_scale;
};
AdamWScalars adamw_scalars(const ops::AdamWHyper& hyper, float grad_scale);

// One in-place AdamW step of a dense f32 parameter and its two moments. Every per-element
// operation is an explicitly rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn)
// in the CPU kernel's order, so no compiler flag can contract or reorder it. Bitwise equality
// also needs the CPU side compiled without FMA contraction (-ffp-contract=off).
void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
           const ops::AdamWHyper& hyper, float grad_scale);

// AdamWGroupKernel: one launch per update on the current stream. Launches are asynchronous,
// so the CPU kernel's reason for grouping (a barrier per tensor) does not arise here.
void adamw_group(std::span<const ops::AdamWUpdate> updates, float grad_scale);

// AdamWGroupDeviceKernel: one launch per 24 updates, the scale, skip flag and skip count read
// from device memory, so the host neither waits for the clip nor for the verdict.
void adamw_group_device(std::span<const ops::AdamWUpdate> updates, const Tensor& record,
                        const Tensor& state, const Tensor& bias, int64_t skip_base);

}  // namespace braid::cuda
