// Strategy's default step path: the whole model on this rank, micro-batches accumulated.
#include "braid/parallel/strategy.h"

#include "braid/ops/elementwise.h"

namespace braid::parallel {

nn::GptStagePart Strategy::model_part(const nn::GptConfig& config, const dist::ParallelGrid&) {
  return nn::GptStagePart::whole(config);
}

StepLoss Strategy::forward_backward(const nn::Gpt& model, const StepBatches& batches) {
  const int accumulate = batches.accumulate;
  BRAID_CHECK(accumulate >= 1, "a step needs at least one batch, got {}", accumulate);
  const float inverse = 1.0f / static_cast<float>(accumulate);
  Tensor micro_scale = Tensor::full({}, inverse);
  StepLoss out;
  for (int micro = 0; micro < accumulate; ++micro) {
    data::Batch batch = batches.next();
    Tensor loss = model.loss(batch.inputs, batch.targets);
    if (loss.device().is_cpu()) {
      out.loss += loss.item();
    } else {
      // On a device the loss is summed there: reading it would wait for the device.
      if (micro_scale.device() != loss.device())
        micro_scale = Tensor::full({}, inverse, DType::f32, loss.device());
      out.device_loss =
          out.device_loss.defined() ? add(out.device_loss, loss.detach()) : loss.detach();
    }
    out.tokens += batch.inputs.numel();
    begin_backward(micro == accumulate - 1);
    loss.backward(micro_scale);  // the step's gradient is the mean over micro-batches
  }
  out.loss /= accumulate;
  if (out.device_loss.defined() && accumulate > 1) scale_(out.device_loss, inverse);
  return out;
}

double Strategy::eval_loss(const nn::Gpt& model, const data::Batch& batch) {
  return model.loss(batch.inputs, batch.targets).item();
}

std::vector<int32_t> Strategy::generate(const nn::Gpt& model, std::vector<int32_t> prompt,
                                        const nn::SampleOptions& options) {
  return model.generate(std::move(prompt), options);
}

}  // namespace braid::parallel
