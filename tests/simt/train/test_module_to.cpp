// nn::Module::to on the emulated device: parameters and gradients move in place, every handle
// follows, values are exact, and an optimizer built on the handles updates the device memory.
#include <gtest/gtest.h>

#include <vector>

#include "braid/nn/gpt.h"
#include "braid/optim/optimizer.h"
#include "device_training_fixture.h"

namespace braid::train::device_training {
namespace {

nn::GptConfig tiny() {
  nn::GptConfig c;
  c.vocab_size = 50;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 4;
  return c;
}

TEST(ModuleTo, MovesParametersAndGradientsInPlace) {
  if (!have_cuda_device()) GTEST_SKIP() << "no CUDA device";
  nn::Gpt model(tiny());
  model.init_weights(5);
  const nn::NamedTensors handles = model.named_parameters();  // copies of the handles
  std::vector<std::vector<float>> values;
  for (const auto& [name, p] : handles) values.push_back(p.to_vector());
  // One gradient exists before the move, the others do not.
  Tensor first = handles.front().second;
  first.set_grad(Tensor::full(first.shape(), 0.5f));
  optim::AdamW adamw(optim::decay_groups(handles, 0.1f), {});

  model.to(Device::cuda(0));
  for (size_t i = 0; i < handles.size(); ++i) {
    const Tensor& p = handles[i].second;
    EXPECT_EQ(p.device(), Device::cuda(0)) << handles[i].first;
    EXPECT_TRUE(p.requires_grad()) << handles[i].first;
    EXPECT_TRUE(p.same(model.named_parameters()[i].second)) << handles[i].first;
    EXPECT_EQ(p.to(Device::cpu()).to_vector(), values[i]) << handles[i].first;
  }
  ASSERT_EQ(first.grad().device(), Device::cuda(0));
  EXPECT_EQ(first.grad().to(Device::cpu()).to_vector(), std::vector<float>(first.numel(), 0.5f));
  EXPECT_TRUE(adamw.params().front().param.same(first));

  // Moving again to where it is keeps the memory; the update lands on the device.
  const void* memory = first.data_ptr();
  model.to(Device::cuda(0));
  EXPECT_EQ(first.data_ptr(), memory);
  adamw.step(1e-2f);
  EXPECT_EQ(adamw.exp_avg(0).device(), Device::cuda(0));
  EXPECT_NE(first.to(Device::cpu()).to_vector(), values[0]);

  // And back to the host, exactly.
  const std::vector<float> trained = first.to(Device::cpu()).to_vector();
  model.to(Device::cpu());
  EXPECT_EQ(first.device(), Device::cpu());
  EXPECT_EQ(first.grad().device(), Device::cpu());
  EXPECT_EQ(first.to_vector(), trained);
}

}  // namespace
}  // namespace braid::train::device_training
