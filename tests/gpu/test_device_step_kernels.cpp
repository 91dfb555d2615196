// The device step's CUDA kernels against their CPU twins: grad_norm (double partials in a fixed
// order: the norm agrees to double rounding, the clip scale follows), step_verdict exactly, and
// adamw_group_device bitwise equal to AdamWKernel at the shifted step, skipped when told.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/optim/optimizer.h"
#include "cuda_runtime.cuh"
#include "support/test_util.h"

namespace braid::testing {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<float> host(const Tensor& t) {
  return t.to(Device::cpu()).to_vector();
}

TEST(CudaDeviceStep, GradNormMatchesTheCpuKernel) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  // Sizes across the batch of 32 tensors per launch, an empty one and a multi-block one.
  std::vector<Tensor> cpu_grads, gpu_grads;
  for (int i = 0; i < 37; ++i) {
    const int64_t n = i == 5 ? 0 : (i == 9 ? 70000 : 1 + 13 * i);
    cpu_grads.push_back(randn({n}, 100 + i, 0.5f));
    gpu_grads.push_back(cpu_grads.back().to(kGpu));
  }
  for (float max_norm : {0.0f, 1.0f, 1e9f}) {
    Tensor c = Tensor::empty({2}), g = Tensor::empty({2}, DType::f32, kGpu);
    ops::kernel<ops::GradNormKernel>(Device::cpu())(cpu_grads, max_norm, c);
    ops::kernel<ops::GradNormKernel>(kGpu)(gpu_grads, max_norm, g);
    const std::vector<float> cv = c.to_vector(), gv = host(g);
    // Both sum squares in double (the CPU over fp32 blocks of 256): 2e-6 relative covers them.
    EXPECT_NEAR(gv[0], cv[0], 2e-6 * cv[0]) << max_norm;
    EXPECT_NEAR(gv[1], cv[1], 2e-6 * cv[1]) << max_norm;
    if (max_norm == 0.0f || max_norm == 1e9f) EXPECT_EQ(gv[1], 1.0f);
    // Deterministic: a second run gives the same bits.
    Tensor again = Tensor::empty({2}, DType::f32, kGpu);
    ops::kernel<ops::GradNormKernel>(kGpu)(gpu_grads, max_norm, again);
    EXPECT_EQ(host(again), gv);
  }
  gpu_grads[3] = Tensor::full({4}, NAN).to(kGpu);
  Tensor g = Tensor::empty({2}, DType::f32, kGpu);
  ops::kernel<ops::GradNormKernel>(kGpu)(gpu_grads, 1.0f, g);
  EXPECT_TRUE(std::isnan(host(g)[0]));
  EXPECT_EQ(host(g)[1], 1.0f);
}

TEST(CudaDeviceStep, VerdictMatchesTheCpuKernel) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  Tensor cr = Tensor::zeros({ops::kStepRecord}), cs = Tensor::zeros({ops::kStepState});
  Tensor gr = cr.to(kGpu), gs = cs.to(kGpu);
  const std::vector<std::pair<float, std::vector<float>>> steps = {
      {2.0f, {1.5f, 0.5f}}, {NAN, {1.0f, 1.0f}}, {3.0f, {INFINITY, 1.0f}}, {1.0f, {2.0f, 1.0f}}};
  for (size_t i = 0; i < steps.size(); ++i) {
    const Tensor loss = Tensor::full({}, steps[i].first);
    const Tensor clip = Tensor::from_vector(steps[i].second, {2});
    ops::kernel<ops::StepVerdictKernel>(Device::cpu())(loss, clip, 10 + i, cr, cs);
    ops::kernel<ops::StepVerdictKernel>(kGpu)(loss.to(kGpu), clip.to(kGpu), 10 + i, gr, gs);
    const std::vector<float> want = cr.to_vector(), got = host(gr);
    for (int k = 0; k < ops::kStepRecord; ++k)
      EXPECT_TRUE(got[k] == want[k] || (std::isnan(got[k]) && std::isnan(want[k])))
          << "step " << i << " field " << k;
    EXPECT_EQ(host(gs), cs.to_vector()) << "step " << i;
  }
  EXPECT_EQ(cs.to_vector(), (std::vector<float>{2.0f, 12.0f}));
}

TEST(CudaDeviceStep, AdamWGroupDeviceIsBitwiseTheCpuAdamW) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  // 30 tensors (two launches of up to 24), one of them large and one empty.
  const int kTensors = 30;
  std::vector<Tensor> p, g, m, v, dp, dg, dm, dv;
  for (int i = 0; i < kTensors; ++i) {
    const int64_t n = i == 4 ? 0 : (i == 7 ? 50000 : 3 + 17 * i);
    p.push_back(randn({n}, 10 + i));
    g.push_back(randn({n}, 50 + i));
    m.push_back(randn({n}, 90 + i, 0.1f));
    std::vector<float> second = randn({n}, 130 + i, 0.1f).to_vector();
    for (float& x : second) x = std::abs(x);
    v.push_back(Tensor::from_vector(second, {n}));
    for (auto [from, to] : {std::pair{&p, &dp}, {&g, &dg}, {&m, &dm}, {&v, &dv}})
      to->push_back(from->back().to(kGpu));
  }
  // Steps 3..9 as the host counts them; 2 skips on the device of which 1 is counted: each
  // update runs at its step - 1.
  std::vector<ops::AdamWUpdate> cpu, gpu;
  for (int i = 0; i < kTensors; ++i) {
    const ops::AdamWHyper h{1e-3f * (1 + i % 3), 0.9f,     0.95f, 1e-8f,
                            i % 2 ? 0.1f : 0.0f, 3 + i % 7};
    ops::AdamWHyper shifted = h;
    shifted.step -= 1;
    cpu.push_back({&p[i], &g[i], &m[i], &v[i], shifted});
    gpu.push_back({&dp[i], &dg[i], &dm[i], &dv[i], h});
  }
  ops::kernel<ops::AdamWGroupKernel>(Device::cpu())(cpu, 0.75f);
  const Tensor record =
      Tensor::from_vector(std::vector<float>{1.0f, 2.0f, 0.75f, 0.0f}, {4}).to(kGpu);
  const Tensor state = Tensor::from_vector(std::vector<float>{2.0f, 5.0f}, {2}).to(kGpu);
  // The bias table AdamW builds (optimizer.cpp) for steps 1..16, from the float betas.
  std::vector<double> table;
  for (int s = 1; s <= 16; ++s) {
    table.push_back(1.0 - std::pow(static_cast<double>(0.9f), static_cast<double>(s)));
    table.push_back(1.0 - std::pow(static_cast<double>(0.95f), static_cast<double>(s)));
  }
  Tensor bias_host = Tensor::empty({32}, DType::i64);
  std::memcpy(bias_host.data<int64_t>(), table.data(), table.size() * sizeof(double));
  const Tensor bias = bias_host.to(kGpu);
  ops::kernel<ops::AdamWGroupDeviceKernel>(kGpu)(gpu, record, state, bias, 1);
  for (int i = 0; i < kTensors; ++i) {
    EXPECT_EQ(host(dp[i]), p[i].to_vector()) << "param " << i;
    EXPECT_EQ(host(dm[i]), m[i].to_vector()) << "exp_avg " << i;
    EXPECT_EQ(host(dv[i]), v[i].to_vector()) << "exp_avg_sq " << i;
  }
  // A skipped record changes nothing.
  const Tensor skip = Tensor::from_vector(std::vector<float>{NAN, NAN, 1.0f, 1.0f}, {4}).to(kGpu);
  const std::vector<float> before = host(dp[7]);
  ops::kernel<ops::AdamWGroupDeviceKernel>(kGpu)(gpu, skip, state, bias, 1);
  EXPECT_EQ(host(dp[7]), before);
  // A step past the table is refused before any launch.
  gpu[0].hyper.step = 17;
  EXPECT_THROW(ops::kernel<ops::AdamWGroupDeviceKernel>(kGpu)(gpu, record, state, bias, 1), Error);
}

}  // namespace
}  // namespace braid::testing
