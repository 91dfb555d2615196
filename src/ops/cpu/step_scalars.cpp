// CPU twins of the device step's kernels: gradient norm and clip scale (whole or in parts),
// verdict, and the AdamW group update that reads its scale and skip flag from tensors.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {

namespace {

// Tensor by tensor in order, each as the SumKernel computes it: the norm optim::clip_coefficient
// computes from the same gradients.
double squares_of(std::span<const Tensor> grads) {
  double squares = 0;
  for (const Tensor& g : grads) {
    double s = 0, sq = 0;
    if (g.numel() > 0) sum(g, &s, &sq);
    squares += sq;
  }
  return squares;
}

void write_clip(double squares, float max_norm, Tensor& clip) {
  const double norm = std::sqrt(squares);
  float scale = 1.0f;
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
    if (coef < 1.0) scale = static_cast<float>(coef);
  }
  float* out = clip.data<float>();
  out[0] = static_cast<float>(norm);
  out[1] = scale;
}

}  // namespace

void grad_norm(std::span<const Tensor> grads, float max_norm, Tensor& clip) {
  write_clip(squares_of(grads), max_norm, clip);
}

void grad_squares(std::span<const Tensor> grads, Tensor& squares) {
  squares.data<float>()[0] = static_cast<float>(squares_of(grads));
}

void clip_from_squares(const Tensor& squares, float max_norm, Tensor& clip) {
  const Tensor dense = squares.contiguous();
  double total = 0;
  for (int64_t i = 0; i < dense.numel(); ++i) total += static_cast<double>(dense.data<float>()[i]);
  write_clip(total, max_norm, clip);
}

void step_verdict(const Tensor& loss, const Tensor& clip, int64_t step, Tensor& record,
                  Tensor& state) {
  const float l = loss.data<float>()[0];
  const float* c = clip.data<float>();
  float* r = record.data<float>();
  float* s = state.data<float>();
  const bool skip = !std::isfinite(l) || !std::isfinite(c[0]);
  r[kRecordLoss] = l;
  r[kRecordNorm] = c[0];
  r[kRecordScale] = c[1];
  r[kRecordSkip] = skip ? 1.0f : 0.0f;
  if (skip) {
    s[kStateSkipped] += 1.0f;
    if (s[kStateFirstNonFinite] == 0.0f) s[kStateFirstNonFinite] = static_cast<float>(step + 1);
  }
}

void adamw_group_device(std::span<const AdamWUpdate> updates, const Tensor& record,
                        const Tensor& state, const Tensor& bias, int64_t skip_base) {
  const float* r = record.data<float>();
  if (r[kRecordSkip] != 0.0f) return;
  const int64_t unseen = static_cast<int64_t>(state.data<float>()[kStateSkipped]) - skip_base;
  // adamw_group computes the bias corrections from the step itself, as the table holds them.
  std::vector<AdamWUpdate> shifted(updates.begin(), updates.end());
  for (AdamWUpdate& u : shifted) u.hyper.step -= unseen;
  adamw_group(shifted, r[kRecordScale]);
}

}  // namespace braid::ops::cpu
