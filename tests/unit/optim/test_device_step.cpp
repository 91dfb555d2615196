// The device step's CPU kernels (grad_norm, step_verdict, adamw_group_device) against the
// host-driven path they stand in for, and Optimizer::set_device_step / count_device_skips.
#include <cmath>

#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/optim/clip.h"
#include "braid/optim/optimizer.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

constexpr Device kCpu{};

// grad_norm on the CPU is clip_coefficient's norm and scale, bit for bit.
TEST(DeviceStepKernels, GradNormEqualsTheHostClip) {
  Tensor a = randn({300, 7}, 1).set_requires_grad(true);
  Tensor b = randn({5}, 2).set_requires_grad(true);
  a.set_grad(randn({300, 7}, 3, 2.0f));
  b.set_grad(randn({5}, 4, 2.0f));
  for (float max_norm : {0.0f, 1.0f, 1e6f}) {
    const optim::ClipResult host = optim::clip_coefficient({a, b}, max_norm);
    Tensor clip = Tensor::empty({2});
    ops::kernel<ops::GradNormKernel>(kCpu)(std::vector<Tensor>{a.grad(), b.grad()}, max_norm, clip);
    EXPECT_EQ(clip.to_vector()[0], static_cast<float>(host.norm)) << max_norm;
    EXPECT_EQ(clip.to_vector()[1], host.scale) << max_norm;
  }
  // A non-finite gradient: the norm is not finite and nothing is clipped.
  b.set_grad(Tensor::from_vector(std::vector<float>{NAN, 1, 1, 1, 1}, {5}));
  Tensor clip = Tensor::empty({2});
  ops::kernel<ops::GradNormKernel>(kCpu)(std::vector<Tensor>{a.grad(), b.grad()}, 1.0f, clip);
  EXPECT_TRUE(std::isnan(clip.to_vector()[0]));
  EXPECT_EQ(clip.to_vector()[1], 1.0f);
}

TEST(DeviceStepKernels, VerdictRecordsTheStepAndCountsSkips) {
  Tensor record = Tensor::zeros({ops::kStepRecord}), state = Tensor::zeros({ops::kStepState});
  const auto verdict = ops::kernel<ops::StepVerdictKernel>(kCpu);
  verdict(Tensor::full({}, 2.5f), Tensor::from_vector(std::vector<float>{3.0f, 0.25f}, {2}), 4,
          record, state);
  EXPECT_EQ(record.to_vector(), (std::vector<float>{2.5f, 3.0f, 0.25f, 0.0f}));
  EXPECT_EQ(state.to_vector(), (std::vector<float>{0.0f, 0.0f}));
  // A non-finite loss, then a non-finite norm: both skipped, the first one named (1-based).
  verdict(Tensor::full({}, INFINITY), Tensor::from_vector(std::vector<float>{1, 1}, {2}), 5, record,
          state);
  EXPECT_EQ(record.to_vector()[ops::kRecordSkip], 1.0f);
  verdict(Tensor::full({}, 1.0f), Tensor::from_vector(std::vector<float>{NAN, 1}, {2}), 8, record,
          state);
  EXPECT_EQ(record.to_vector()[ops::kRecordSkip], 1.0f);
  EXPECT_EQ(state.to_vector(), (std::vector<float>{2.0f, 6.0f}));
}

// One parameter updated by adamw_group_device equals AdamWKernel with the skips taken off its
// step, bitwise; a skipped record leaves everything as it was.
TEST(DeviceStepKernels, AdamWGroupDeviceIsAdamWAtTheShiftedStep) {
  const Tensor p0 = randn({1000}, 5), g = randn({1000}, 6), m0 = randn({1000}, 7, 0.1f);
  std::vector<float> second_moment = randn({1000}, 8, 0.1f).to_vector();
  for (float& x : second_moment) x = std::abs(x);  // a second moment is never negative
  const Tensor v_pos = Tensor::from_vector(second_moment, {1000});
  const ops::AdamWHyper hyper{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7};
  // The reference: step 7 - (3 skipped - 1 already counted) = 5, scale 0.5.
  Tensor p = p0.clone(), m = m0.clone(), v = v_pos.clone();
  ops::AdamWHyper shifted = hyper;
  shifted.step = 5;
  ops::kernel<ops::AdamWKernel>(kCpu)(p, g, m, v, shifted, 0.5f);
  Tensor q = p0.clone(), mq = m0.clone(), vq = v_pos.clone();
  const ops::AdamWUpdate u{&q, &g, &mq, &vq, hyper};
  Tensor record = Tensor::from_vector(std::vector<float>{1.0f, 2.0f, 0.5f, 0.0f}, {4});
  const Tensor state = Tensor::from_vector(std::vector<float>{3.0f, 2.0f}, {2});
  const Tensor no_table;  // the CPU computes the bias corrections itself
  ops::kernel<ops::AdamWGroupDeviceKernel>(kCpu)({&u, 1}, record, state, no_table, 1);
  EXPECT_EQ(q.to_vector(), p.to_vector());
  EXPECT_EQ(mq.to_vector(), m.to_vector());
  EXPECT_EQ(vq.to_vector(), v.to_vector());
  record = Tensor::from_vector(std::vector<float>{NAN, NAN, 1.0f, 1.0f}, {4});
  const std::vector<float> before = q.to_vector();
  ops::kernel<ops::AdamWGroupDeviceKernel>(kCpu)({&u, 1}, record, state, no_table, 1);
  EXPECT_EQ(q.to_vector(), before);
}

// AdamW driven by a device step (here on the CPU's own tensors): the scale comes from the
// record, a skipped step changes nothing, and count_device_skips takes it off the counts so the
// next update is the one a host-skipped run makes.
TEST(DeviceStepKernels, AnOptimizerOnADeviceStepSkipsAndRecounts) {
  const Tensor init = randn({64}, 9);
  auto make = [&](Tensor& param) {
    param = init.clone().set_requires_grad(true);
    return optim::AdamW({{"w", param, 0.1f}}, {});
  };
  Tensor a, b;
  optim::AdamW host = make(a), device = make(b);
  Tensor record = Tensor::from_vector(std::vector<float>{1, 1, 0.5f, 0}, {4});
  Tensor state = Tensor::zeros({2});
  device.set_device_step(record, state);
  auto grads = [&](int k) {
    a.set_grad(randn({64}, 20 + k));
    b.set_grad(randn({64}, 20 + k));
  };
  grads(0);
  host.step(1e-2f, 0.5f);
  device.step(1e-2f, 123.0f);  // the argument is ignored: the record says 0.5
  EXPECT_EQ(b.to_vector(), a.to_vector());
  // A skipped step: the host run does not call step(); the device run does, and skips.
  grads(1);
  record.copy_(Tensor::from_vector(std::vector<float>{NAN, NAN, 1, 1}, {4}));
  state.copy_(Tensor::from_vector(std::vector<float>{1, 2}, {2}));
  device.step(1e-2f, 1.0f);
  EXPECT_EQ(b.to_vector(), a.to_vector());
  EXPECT_EQ(device.steps_taken(), 2);
  // The next step before the host has seen the skip, then after: both equal the host run's.
  grads(2);
  record.copy_(Tensor::from_vector(std::vector<float>{1, 1, 0.25f, 0}, {4}));
  host.step(2e-2f, 0.25f);
  device.step(2e-2f, 1.0f);
  EXPECT_EQ(b.to_vector(), a.to_vector());
  device.count_device_skips(1);
  EXPECT_EQ(device.steps_taken(), host.steps_taken());
  EXPECT_EQ(device.param_steps(0), host.param_steps(0));
  grads(3);
  host.step(2e-2f, 0.25f);
  device.step(2e-2f, 1.0f);
  EXPECT_EQ(b.to_vector(), a.to_vector());
  // Counting more skips than steps, or fewer than before, is an error.
  EXPECT_THROW(device.count_device_skips(0), Error);
  EXPECT_THROW(device.count_device_skips(100), Error);
}

}  // namespace
}  // namespace braid::testing
