// CUDA global-norm clipping and the step verdict, without leaving the device.
#pragma once

#include "braid/ops/kernel_signatures.h"

namespace braid::cuda {

// GradNormKernel: one launch per kSquaresBatch gradients writes per-block double partials, one
// single-block launch sums them in a fixed order and computes the norm and clip scale.
void grad_norm(std::span<const Tensor> grads, float max_norm, Tensor& clip);
// GradSquaresKernel: grad_norm's partials, summed by one block into squares[0].
void grad_squares(std::span<const Tensor> grads, Tensor& squares);
// ClipFromSquaresKernel: one thread.
void clip_from_squares(const Tensor& squares, float max_norm, Tensor& clip);
// StepVerdictKernel: one thread.
void step_verdict(const Tensor& loss, const Tensor& clip, int64_t step, Tensor& record,
                  Tensor& state);

}  // namespace braid::cuda
