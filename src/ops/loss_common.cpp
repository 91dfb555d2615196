// The cross-entropy ops' shared target count, mean loss and device-scalar scaling.
#include "ops/loss_common.h"

#include "braid/ops/elementwise.h"
#include "braid/ops/host_checked.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid::ops {

int64_t checked_target_count(const Tensor& targets, int64_t num_classes, int64_t ignore_index,
                             std::string_view op) {
  const int64_t rows = targets.numel();
  const bool on_host = targets.device().is_cpu();
  const std::optional<HostCheckedIds> known =
      on_host || ignore_index != -1 ? std::nullopt : host_checked(targets);
  if (known) {
    BRAID_CHECK(known->max < known->min || (known->min >= 0 && known->max < num_classes),
                "{} targets in [{}, {}] are outside [0, {}) (ignore_index is {})", op, known->min,
                known->max, num_classes, ignore_index);
    return rows - known->minus_ones;
  }
  const Tensor host = on_host ? targets.contiguous() : targets.to(Device::cpu());
  const int32_t* t = host.data<int32_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (t[i] == ignore_index) continue;
    BRAID_CHECK(t[i] >= 0 && t[i] < num_classes,
                "{} target {} at position {} is outside [0, {}) (ignore_index is {})", op, t[i], i,
                num_classes, ignore_index);
    ++counted;
  }
  return counted;
}

Tensor mean_loss(const Tensor& losses, float denom) {
  if (!losses.device().is_cpu()) {
    Tensor out = Tensor::zeros({}, DType::f32, losses.device());
    kernel<SumToKernel>(losses.device())(losses, out);
    scale_(out, 1.0f / denom);
    return out;
  }
  double total = 0;
  const float* l = losses.data<float>();
  for (int64_t i = 0; i < losses.numel(); ++i) total += l[i];
  return Tensor::full({}, static_cast<float>(total / denom));
}

void mul_by_device_scalar_(Tensor& d, const Tensor& g) {
  kernel<BinaryKernel>(d.device())(BinaryOp::mul, d,
                                   g.alias(d.shape(), Shape(d.dim(), 0), g.offset()), d);
}

}  // namespace braid::ops
