// CUDA kernel tests: every registered CUDA kernel against its CPU twin on random inputs, plus
// host-only checks (registration, argument validation, launch math, the AdamW/SGD operation
// order) that run on machines without a GPU.
//
// Tolerances: kernels that perform the same IEEE operations in the same order as the CPU
// (binary ops, embedding, AdamW, SGD) must match bit for bit. The others differ only in
// summation order and in exp/tanh implementations (CUDA's expf/tanhf versus the CPU's
// polynomials, each within ~2 ulp); each tolerance below is the worst-case fp32 bound for that
// difference, stated where it is used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "braid/core/allocator.h"
#include "braid/core/tensor.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "support/test_util.h"

#ifdef BRAID_WITH_CUDA
#include "attention/attention.cuh"
#include "cuda_runtime.cuh"
#include "elementwise/binary.cuh"
#include "elementwise/copy.cuh"
#include "elementwise/fill.cuh"
#include "elementwise/gelu.cuh"
#include "embedding/embedding.cuh"
#include "gemm/gemm.cuh"
#include "launch_config.h"
#include "loss/vocab_parallel_cross_entropy.cuh"
#include "norm/layer_norm.cuh"
#include "optim/adamw.cuh"
#endif

#ifndef BRAID_WITH_CUDA

TEST(CudaKernels, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA";
}

#else

namespace braid {
namespace {

using ops::BinaryOp;
using ops::KernelRegistry;
using testing::bitwise_equal;
using testing::expect_close;
using testing::randn;
using testing::to_double;
using testing::uniform;

// fp32 unit roundoff (half an ulp at 1): the unit of every tolerance below.
constexpr double kEps = 5.96e-8;

template <class Sig>
typename Sig::Fn cpu_kernel() {
  return KernelRegistry::instance().get<Sig>(DeviceKind::cpu);
}

template <class Sig>
typename Sig::Fn cuda_kernel() {
  cuda::ensure_registered();
  return KernelRegistry::instance().get<Sig>(DeviceKind::cuda);
}

// A dense copy on cuda:0 / back on the host.
Tensor gpu(const Tensor& t) {
  cuda::ensure_registered();
  return t.to(Device::cuda());
}
Tensor host(const Tensor& t) {
  return t.to(Device::cpu());
}
Tensor gpu_empty(const Shape& shape, DType dtype = DType::f32) {
  cuda::ensure_registered();
  return Tensor::empty(shape, dtype, Device::cuda());
}

// The same view (shape, strides, offset) of a device copy of `base`; base is dense.
Tensor same_view(const Tensor& device_base, const Tensor& host_view) {
  return device_base.alias(host_view.shape(), host_view.strides(), host_view.offset());
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : to_double(t)) m = std::max(m, std::abs(v));
  return m;
}

// ============================== tests that need a device ====================================

TEST(CudaKernels, MemoryRoundTripIsExact) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Tensor x = randn({3, 1000}, 11);
  Tensor on_device = gpu(x);
  EXPECT_EQ(on_device.device(), Device::cuda());
  Tensor copied = on_device.clone();  // device-to-device copy
  EXPECT_TRUE(bitwise_equal(host(copied), x));
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{3, -1, 7, 1 << 30}, {4});
  EXPECT_EQ(testing::ids_of(host(gpu(ids))), testing::ids_of(ids));
  EXPECT_ERROR_CONTAINS(Tensor::empty({4}, DType::f32, Device::cuda(cuda::device_count())),
                        "does not exist");
}

TEST(CudaKernels, BinaryMatchesCpuBitwise) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  // One IEEE operation per element on both sides: results must be identical.
  const Shape shape{4, 5, 6};
  Tensor a_base = randn({120}, 1);
  Tensor b_base = uniform({120}, 2, 0.5f, 2.0f);  // away from 0: div stays finite
  Tensor a_dev = gpu(a_base), b_dev = gpu(b_base);
  struct Case {
    const char* name;
    Tensor a, b;  // host views of a_base / b_base
  };
  const std::vector<Case> cases = {
      {"dense", a_base.alias(shape, {30, 6, 1}, 0), b_base.alias(shape, {30, 6, 1}, 0)},
      {"row broadcast", a_base.alias(shape, {30, 6, 1}, 0), b_base.alias(shape, {0, 0, 1}, 3)},
      {"transposed a", a_base.alias(shape, {1, 4, 20}, 0), b_base.alias(shape, {30, 6, 1}, 0)},
      {"column broadcast", a_base.alias(shape, {1, 0, 0}, 5), b_base.alias(shape, {0, 6, 1}, 0)},
  };
  for (const Case& c : cases) {
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
      SCOPED_TRACE(::testing::Message() << c.name << ", op " << static_cast<int>(op));
      Tensor expected = Tensor::empty(shape);
      cpu_kernel<ops::BinaryKernel>()(op, c.a, c.b, expected);
      Tensor out = gpu_empty(shape);
      cuda_kernel<ops::BinaryKernel>()(op, same_view(a_dev, c.a), same_view(b_dev, c.b), out);
      EXPECT_TRUE(bitwise_equal(host(out), expected));
    }
  }
  // In place (out aliases a), the add_ pattern.
  Tensor acc = a_base.alias(shape, {30, 6, 1}, 0).clone();
  Tensor acc_dev = gpu(acc);
  Tensor row = b_base.alias(shape, {0, 0, 1}, 0);
  cpu_kernel<ops::BinaryKernel>()(BinaryOp::add, acc, row, acc);
  cuda_kernel<ops::BinaryKernel>()(BinaryOp::add, acc_dev, same_view(b_dev, row), acc_dev);
  EXPECT_TRUE(bitwise_equal(host(acc_dev), acc));
}

TEST(CudaKernels, AffineMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Tensor x = randn({1001}, 3);
  Tensor expected = Tensor::empty({1001});
  cpu_kernel<ops::AffineKernel>()(x, 1.7f, -0.3f, expected);
  Tensor x_dev = gpu(x), out = gpu_empty({1001});
  cuda_kernel<ops::AffineKernel>()(x_dev, 1.7f, -0.3f, out);
  // The CPU may fuse the multiply-add, the GPU rounds twice: at most 0.5 ulp of the product
  // (|alpha x| <= 1.7 * 5) plus 1 ulp of the result apart.
  expect_close(host(out), expected, 2 * kEps, kEps * 1.7 * 5);
  cuda_kernel<ops::AffineKernel>()(x_dev, 1.7f, -0.3f, x_dev);  // in place
  expect_close(host(x_dev), expected, 2 * kEps, kEps * 1.7 * 5);
}

TEST(CudaKernels, SumAccumulatesInDouble) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{(1 << 20) + 7}}) {
    Tensor x = randn({n}, 4);
    double ref = 0, ref_sq = 0, abs_sum = 0;
    for (double v : to_double(x)) {
      ref += v;
      ref_sq += v * v;
      abs_sum += std::abs(v);
    }
    double s = -1, sq = -1;
    cuda_kernel<ops::SumKernel>()(gpu(x), &s, &sq);
    // Only the order of double additions differs: at most n * 2^-53 * sum|terms|.
    const double bound = static_cast<double>(n) * 1.12e-16;
    EXPECT_NEAR(s, ref, bound * abs_sum) << "n = " << n;
    EXPECT_NEAR(sq, ref_sq, bound * ref_sq) << "n = " << n;
  }
  double s = -1, sq = -1;
  cuda_kernel<ops::SumKernel>()(gpu_empty({0}), &s, &sq);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(sq, 0.0);
}

// out[j] = init[j] + the sum of x over the elements broadcasting onto j, in double.
std::vector<double> sum_to_reference(const Tensor& x, const Shape& out_shape,
                                     const std::vector<double>& init) {
  std::vector<double> out = init;
  const std::vector<double> xv = to_double(x);
  const Shape& xs = x.shape();
  const int lead = x.dim() - static_cast<int>(out_shape.size());
  const Shape out_strides = contiguous_strides(out_shape);
  for (size_t flat = 0; flat < xv.size(); ++flat) {
    int64_t rest = static_cast<int64_t>(flat), target = 0;
    for (int d = x.dim() - 1; d >= 0; --d) {
      const int64_t idx = rest % xs[d];
      rest /= xs[d];
      const int od = d - lead;
      if (od >= 0 && out_shape[od] != 1) target += idx * out_strides[od];
    }
    out[target] += xv[flat];
  }
  return out;
}

TEST(CudaKernels, SumToMatchesDoubleReference) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Tensor x = randn({6, 300, 24}, 5);  // 300 rows per out column: more than one row chunk
  Tensor x_dev = gpu(x);
  const std::vector<Shape> outs = {{24}, {300, 24}, {1, 300, 1}, {6, 1, 24}, {6, 1, 1}, {}};
  for (const Shape& out_shape : outs) {
    SCOPED_TRACE(shape_str(out_shape));
    const int64_t n = shape_numel(out_shape);
    // Non-zero start: the kernel accumulates into out, as the CPU kernel does.
    Tensor init = uniform(out_shape, 6, -1.0f, 1.0f);
    Tensor out = gpu(init);
    cuda_kernel<ops::SumToKernel>()(x_dev, out);
    const std::vector<double> ref = sum_to_reference(x, out_shape, to_double(init));
    // Summed in double, then rounded to float and added to init: two fp32 roundings (<= 2 ulp
    // of results of magnitude <= 6 * 300 * 4).
    EXPECT_EQ(static_cast<int64_t>(ref.size()), n);
    expect_close(host(out), ref, 2 * kEps, 2 * kEps);
  }
}

TEST(CudaKernels, GeluMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Tensor x = randn({4099}, 7, 3.0f), dy = randn({4099}, 8);
  Tensor y = Tensor::empty({4099}), dx = Tensor::empty({4099});
  cpu_kernel<ops::GeluForwardKernel>()(x, y);
  cpu_kernel<ops::GeluBackwardKernel>()(x, dy, dx);
  Tensor x_dev = gpu(x), y_dev = gpu_empty({4099}), dx_dev = gpu_empty({4099});
  cuda_kernel<ops::GeluForwardKernel>()(x_dev, y_dev);
  cuda_kernel<ops::GeluBackwardKernel>()(x_dev, gpu(dy), dx_dev);
  // tanh differs by <= 4e-7 absolute: the CPU's fast_tanh is within ~2e-7, tanhf within 2 ulp
  // (1.2e-7), and the argument may differ by an ulp where the CPU build fuses multiply-adds
  // (<= 6e-8 once through tanh's slope). That moves y = 0.5 x (1 + t) by 0.5 |x| dt, and dx by
  // |dy| (0.5 + |x| |t| dinner) dt with dinner = sqrt(2/pi) (1 + 3 c x^2); plus 4 ulp of
  // rounding either way.
  const std::vector<double> xv = to_double(x), dyv = to_double(dy);
  const std::vector<double> yv = to_double(y), dxv = to_double(dx);
  const std::vector<double> y_gpu = to_double(host(y_dev)), dx_gpu = to_double(host(dx_dev));
  constexpr double kTanhGap = 4e-7;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double v = xv[i], dinner = 0.7978845608 * (1 + 3 * 0.044715 * v * v);
    const double y_bound = 0.5 * std::abs(v) * kTanhGap + 4 * kEps * std::abs(yv[i]) + 1e-30;
    const double dx_bound = std::abs(dyv[i]) * (0.5 + std::abs(v) * dinner) * kTanhGap +
                            4 * kEps * std::abs(dxv[i]) + 1e-30;
    ASSERT_LE(std::abs(y_gpu[i] - yv[i]), y_bound) << "y at x = " << v;
    ASSERT_LE(std::abs(dx_gpu[i] - dxv[i]), dx_bound) << "dx at x = " << v;
  }
}

TEST(CudaKernels, SoftmaxMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Shape shape{37, 1000};
  Tensor x = randn(shape, 9, 3.0f), dy = randn(shape, 10);
  Tensor y = Tensor::empty(shape), dx = Tensor::empty(shape);
  cpu_kernel<ops::SoftmaxForwardKernel>()(x, y);
  cpu_kernel<ops::SoftmaxBackwardKernel>()(y, dy, dx);
  Tensor y_dev = gpu_empty(shape), dx_dev = gpu_empty(shape);
  cuda_kernel<ops::SoftmaxForwardKernel>()(gpu(x), y_dev);
  // Backward from the CPU's y, so only the backward's own rounding is compared.
  cuda_kernel<ops::SoftmaxBackwardKernel>()(gpu(y), gpu(dy), dx_dev);
  // Each y carries 2-ulp exp differences and the relative error of a 1000-term positive sum
  // (<= 1000 / 8 * eps for the CPU's 8-lane sequential sums): ~8e-6 relative.
  expect_close(host(y_dev), y, 1e-5, 1e-12);
  // dot = sum(y dy) over 1000 terms: absolute error <= 1000 eps sum|y dy| <= 1000 eps max|dy|.
  expect_close(host(dx_dev), dx, 1e-5, 1000 * kEps * max_abs(dy) * max_abs(y));
}

TEST(CudaKernels, LayerNormMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 300, c = 768;  // 300 rows: the weight-gradient sum spans two row chunks
  Tensor x = randn({n, c}, 12, 2.0f, 0.5f), w = randn({c}, 13, 0.5f, 1.0f), b = randn({c}, 14),
         dy = randn({n, c}, 15);
  Tensor y = Tensor::empty({n, c}), mean = Tensor::empty({n}), rstd = Tensor::empty({n});
  cpu_kernel<ops::LayerNormForwardKernel>()(x, w, b, 1e-5f, y, mean, rstd);
  Tensor x_dev = gpu(x), w_dev = gpu(w);
  Tensor y_dev = gpu_empty({n, c}), mean_dev = gpu_empty({n}), rstd_dev = gpu_empty({n});
  cuda_kernel<ops::LayerNormForwardKernel>()(x_dev, w_dev, gpu(b), 1e-5f, y_dev, mean_dev,
                                             rstd_dev);
  // Mean and variance are float sums of C = 768 terms in different orders: the mean errs by
  // <= C eps E|x| ~ 8e-5 and rstd by <= C eps / 2 ~ 2.3e-5 relative. y = (x - m) rstd w + b then
  // errs by |w| (dm rstd + |xhat| drstd/rstd) <= 2.5 (4e-5 + 2.3e-5 |xhat|).
  expect_close(host(mean_dev), mean, 1e-4, 1e-4);
  expect_close(host(rstd_dev), rstd, 1e-4, 0.0);
  expect_close(host(y_dev), y, 1e-4, 2e-4);

  // Backward from the CPU's statistics, so only the backward's own sums are compared.
  Tensor dx = Tensor::empty({n, c}), dw = Tensor::empty({c}), db = Tensor::empty({c});
  cpu_kernel<ops::LayerNormBackwardKernel>()(x, w, mean, rstd, dy, dx, dw, db);
  Tensor dy_dev = gpu(dy), mean_h = gpu(mean), rstd_h = gpu(rstd);
  Tensor dx_dev = gpu_empty({n, c}), dw_dev = gpu_empty({c}), db_dev = gpu_empty({c});
  cuda_kernel<ops::LayerNormBackwardKernel>()(x_dev, w_dev, mean_h, rstd_h, dy_dev, dx_dev, dw_dev,
                                              db_dev);
  // dx: two C-term sums scaled by rstd / C, <= rstd (1 + |xhat|) eps sum|dy w| ~ 8e-5.
  expect_close(host(dx_dev), dx, 1e-4, 1e-4);
  // dweight, dbias: column sums of N = 300 float terms in different orders, each within
  // N eps sum_r |term| (+ 1 ulp for the final rounding), from this data's own terms.
  const std::vector<double> xv = to_double(x), dyv = to_double(dy);
  const std::vector<double> mv = to_double(mean), rv = to_double(rstd);
  const std::vector<double> dwv = to_double(dw), dbv = to_double(db);
  const std::vector<double> dw_gpu = to_double(host(dw_dev)), db_gpu = to_double(host(db_dev));
  for (int64_t j = 0; j < c; ++j) {
    double abs_w = 0, abs_b = 0;
    for (int64_t r = 0; r < n; ++r) {
      const double g = dyv[r * c + j];
      abs_w += std::abs(g * (xv[r * c + j] - mv[r]) * rv[r]);
      abs_b += std::abs(g);
    }
    ASSERT_LE(std::abs(dw_gpu[j] - dwv[j]), n * kEps * abs_w + 2 * kEps * std::abs(dwv[j]))
        << "dweight[" << j << "]";
    ASSERT_LE(std::abs(db_gpu[j] - dbv[j]), n * kEps * abs_b + 2 * kEps * std::abs(dbv[j]))
        << "dbias[" << j << "]";
  }

  // No atomics: a second run gives the same bits.
  Tensor dx2 = gpu_empty({n, c}), dw2 = gpu_empty({c}), db2 = gpu_empty({c});
  cuda_kernel<ops::LayerNormBackwardKernel>()(x_dev, w_dev, mean_h, rstd_h, dy_dev, dx2, dw2, db2);
  EXPECT_TRUE(bitwise_equal(host(dx2), host(dx_dev)));
  EXPECT_TRUE(bitwise_equal(host(dw2), host(dw_dev)));
  EXPECT_TRUE(bitwise_equal(host(db2), host(db_dev)));
}

TEST(CudaKernels, CrossEntropyMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 50, vp = 320, classes = 300, ignore = -100;
  Tensor logits = randn({rows, vp}, 16, 2.0f);
  float* lp = logits.data<float>();
  for (int64_t r = 0; r < rows; ++r)  // padding columns huge: they must not count
    for (int64_t j = classes; j < vp; ++j) lp[r * vp + j] = 1e4f;
  std::vector<int32_t> targets = testing::ids_of(testing::random_ids({rows}, classes, 17));
  targets[3] = targets[20] = static_cast<int32_t>(ignore);
  Tensor tg = Tensor::from_vector(targets, {rows});
  Tensor losses = Tensor::empty({rows}), lse = Tensor::empty({rows});
  cpu_kernel<ops::CrossEntropyForwardKernel>()(logits, tg, classes, ignore, losses, lse);
  Tensor logits_dev = gpu(logits), tg_dev = gpu(tg);
  Tensor losses_dev = gpu_empty({rows}), lse_dev = gpu_empty({rows});
  cuda_kernel<ops::CrossEntropyForwardKernel>()(logits_dev, tg_dev, classes, ignore, losses_dev,
                                                lse_dev);
  // lse = max + log(sum of 300 exps): the sum's relative error (<= 300 / 8 * eps for the CPU's
  // lanes, plus 2-ulp exps) is ~3e-6, which is also lse's absolute error; lse ~ 6.
  expect_close(host(lse_dev), lse, 2 * kEps, 5e-6);
  expect_close(host(losses_dev), losses, 0.0, 1e-5);
  EXPECT_EQ(host(losses_dev).to_vector()[3], 0.0f);

  const float scale = 1.0f / 48;
  Tensor dlogits = Tensor::empty({rows, vp}), dlogits_dev = gpu_empty({rows, vp});
  cpu_kernel<ops::CrossEntropyBackwardKernel>()(logits, tg, lse, classes, ignore, scale, dlogits);
  cuda_kernel<ops::CrossEntropyBackwardKernel>()(logits_dev, tg_dev, gpu(lse), classes, ignore,
                                                 scale, dlogits_dev);
  // From the same lse, p = exp(x - lse) differs by the exps (expf <= 2 ulp, the CPU's <= 0.7
  // ulp) and the rounding of p * scale: <= 3.2 ulp ~ 4e-7 relative. The target entry then
  // subtracts scale, so its absolute error stays ~4 ulp of scale.
  expect_close(host(dlogits_dev), dlogits, 1e-6, 8 * kEps * scale);
  const std::vector<float> d = host(dlogits_dev).to_vector();
  for (int64_t j = 0; j < vp; ++j) EXPECT_EQ(d[3 * vp + j], 0.0f) << "ignored row, column " << j;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = classes; j < vp; ++j) ASSERT_EQ(d[r * vp + j], 0.0f) << "padding " << r;
}

TEST(CudaKernels, VocabShardMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 7, vs = 37;
  // A full piece, one with padding, and one holding only padding.
  for (const int64_t valid : {int64_t{37}, int64_t{20}, int64_t{0}}) {
    SCOPED_TRACE(::testing::Message() << "valid " << valid);
    Tensor logits = randn({rows, vs}, 70 + valid, 2.0f);
    float* lp = logits.data<float>();
    for (int64_t r = 0; r < rows; ++r)  // padding columns huge: they must not count
      for (int64_t j = valid; j < vs; ++j) lp[r * vs + j] = 1e4f;
    std::vector<int32_t> targets(rows, ops::kTargetElsewhere);
    if (valid > 0) targets = testing::ids_of(testing::random_ids({rows}, valid, 71));
    targets[1] = targets[4] = ops::kTargetElsewhere;
    targets[2] = ops::kTargetIgnored;
    Tensor tg = Tensor::from_vector(targets, {rows});
    Tensor mx = Tensor::empty({rows}), se = Tensor::empty({rows}), tl = Tensor::empty({rows});
    cpu_kernel<ops::VocabShardMaxKernel>()(logits, valid, mx);
    cpu_kernel<ops::VocabShardSumExpKernel>()(logits, tg, valid, mx, se, tl);
    Tensor logits_dev = gpu(logits), tg_dev = gpu(tg);
    Tensor mx_dev = gpu_empty({rows}), se_dev = gpu_empty({rows}), tl_dev = gpu_empty({rows});
    cuda_kernel<ops::VocabShardMaxKernel>()(logits_dev, valid, mx_dev);
    // From the CPU's maxima, so only the exp-sum's own rounding is compared.
    cuda_kernel<ops::VocabShardSumExpKernel>()(logits_dev, tg_dev, valid, gpu(mx), se_dev, tl_dev);
    // A max and a gathered logit involve no rounding (-inf on a padding-only piece, 0 for a
    // target held elsewhere or ignored).
    expect_close(host(mx_dev), mx, 0.0, 0.0);
    expect_close(host(tl_dev), tl, 0.0, 0.0);
    // As cross_entropy's lse: a positive sum of <= 300 exps errs by <= 300 / 8 * eps for the
    // CPU's lanes plus the 2-ulp exps, ~3e-6 relative (37 terms here, well inside it).
    expect_close(host(se_dev), se, 5e-6, 0.0);

    // A global lse above this piece's own, as when the other pieces add their exp-sums.
    const std::vector<float> mxv = mx.to_vector(), sev = se.to_vector();
    std::vector<float> lse_values(rows);
    for (int64_t r = 0; r < rows; ++r)
      lse_values[r] = (valid > 0 ? mxv[r] + std::log(sev[r]) : 0.0f) + 0.5f;
    const Tensor lse = Tensor::from_vector(lse_values, {rows});
    const float scale = 1.0f / 48;
    Tensor dlogits = Tensor::empty({rows, vs}), dlogits_dev = gpu_empty({rows, vs});
    cpu_kernel<ops::VocabShardBackwardKernel>()(logits, tg, valid, lse, scale, dlogits);
    cuda_kernel<ops::VocabShardBackwardKernel>()(logits_dev, tg_dev, valid, gpu(lse), scale,
                                                 dlogits_dev);
    // As cross_entropy's gradient: exps within 3.2 ulp relative, the target entry ~4 ulp of
    // scale absolute after subtracting scale.
    expect_close(host(dlogits_dev), dlogits, 1e-6, 8 * kEps * scale);
    const std::vector<float> d = host(dlogits_dev).to_vector();
    for (int64_t j = 0; j < vs; ++j) EXPECT_EQ(d[2 * vs + j], 0.0f) << "ignored row, column " << j;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = valid; j < vs; ++j) ASSERT_EQ(d[r * vs + j], 0.0f) << "padding " << r;
  }
}

// The maps from global targets and ids to one piece, against their definitions on both
// backends (exact), and the per-row losses against float64.
TEST(CudaKernels, VocabShardMapsAndLossesMatchTheirDefinitions) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto ints = [](const Tensor& t) {
    const Tensor h = t.device().is_cpu() ? t : host(t);
    return std::vector<int32_t>(h.data<int32_t>(), h.data<int32_t>() + h.numel());
  };
  // The piece holds global classes [40, 60); 65 of them exist; 7 is ignored.
  const int64_t begin = 40, valid = 20, ignore = 7;
  const std::vector<int32_t> global{0, 39, 40, 41, 59, 60, 64, 7, 52};
  const std::vector<int32_t> want_local{
      ops::kTargetElsewhere, ops::kTargetElsewhere, 0, 1, 19, ops::kTargetElsewhere,
      ops::kTargetElsewhere, ops::kTargetIgnored,   12};
  const int64_t n = static_cast<int64_t>(global.size());
  const Tensor tg = Tensor::from_vector(global, {n});
  Tensor local = Tensor::empty({n}, DType::i32), local_dev = gpu_empty({n}, DType::i32);
  cpu_kernel<ops::VocabShardTargetsKernel>()(tg, begin, valid, ignore, local);
  cuda_kernel<ops::VocabShardTargetsKernel>()(gpu(tg), begin, valid, ignore, local_dev);
  EXPECT_EQ(ints(local), want_local);
  EXPECT_EQ(ints(local_dev), want_local);

  // An embedding piece of 20 rows from 40: ids elsewhere look up row 0 under a zero mask.
  std::vector<int32_t> want_ids;
  std::vector<float> want_mask;
  for (const int32_t id : global) {
    const bool mine = id >= begin && id < begin + valid;
    want_ids.push_back(mine ? id - static_cast<int32_t>(begin) : 0);
    want_mask.push_back(mine ? 1.0f : 0.0f);
  }
  Tensor ids = Tensor::empty({n}, DType::i32), mask = Tensor::empty({n});
  Tensor ids_dev = gpu_empty({n}, DType::i32), mask_dev = gpu_empty({n});
  cpu_kernel<ops::VocabShardIdsKernel>()(tg, begin, valid, ids, mask);
  cuda_kernel<ops::VocabShardIdsKernel>()(gpu(tg), begin, valid, ids_dev, mask_dev);
  EXPECT_EQ(ints(ids), want_ids);
  EXPECT_EQ(mask.to_vector(), want_mask);
  EXPECT_EQ(ints(ids_dev), want_ids);
  EXPECT_EQ(host(mask_dev).to_vector(), want_mask);

  // Losses from all-reduced pieces: lse = max + log(sum), loss = lse - target logit, 0 where
  // ignored; within a few ulp of float64 (one log and two roundings, relative to the terms).
  const Tensor row_max = randn({n}, 72, 3.0f), target_logit = randn({n}, 73, 3.0f);
  Tensor sum_exp = randn({n}, 74, 1.0f);
  for (float& v : std::span(sum_exp.data<float>(), n)) v = 1.0f + std::fabs(v) * 50.0f;
  Tensor lse = Tensor::empty({n}), losses = Tensor::empty({n});
  Tensor lse_dev = gpu_empty({n}), losses_dev = gpu_empty({n});
  cpu_kernel<ops::VocabShardLossKernel>()(row_max, sum_exp, target_logit, local, lse, losses);
  cuda_kernel<ops::VocabShardLossKernel>()(gpu(row_max), gpu(sum_exp), gpu(target_logit), local_dev,
                                           lse_dev, losses_dev);
  const std::vector<float> mx = row_max.to_vector(), se = sum_exp.to_vector(),
                           tl = target_logit.to_vector();
  std::vector<double> want_lse(n), want_losses(n), terms(n);
  for (int64_t i = 0; i < n; ++i) {
    const double log_sum = std::log(static_cast<double>(se[i]));
    want_lse[i] = mx[i] + log_sum;
    want_losses[i] = want_local[i] == ops::kTargetIgnored ? 0.0 : want_lse[i] - tl[i];
    terms[i] = std::fabs(mx[i]) + log_sum + std::fabs(tl[i]);
  }
  for (const auto& [name, got_lse, got_losses] :
       {std::tuple{"cpu", lse.to_vector(), losses.to_vector()},
        std::tuple{"cuda", host(lse_dev).to_vector(), host(losses_dev).to_vector()}}) {
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(got_lse[i], want_lse[i], 4 * kEps * terms[i]) << name << " lse " << i;
      EXPECT_NEAR(got_losses[i], want_losses[i], 8 * kEps * terms[i]) << name << " loss " << i;
    }
  }
  EXPECT_EQ(losses.to_vector()[7], 0.0f);
  EXPECT_EQ(host(losses_dev).to_vector()[7], 0.0f);
}

TEST(CudaKernels, EmbeddingMatchesCpuBitwise) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t vocab = 50, c = 200, tokens = 2500;  // many repeats per row
  Tensor weight = randn({vocab, c}, 18);
  Tensor ids = testing::random_ids({tokens}, vocab, 19);
  Tensor out = Tensor::empty({tokens, c});
  cpu_kernel<ops::EmbeddingForwardKernel>()(weight, ids, out);
  Tensor ids_dev = gpu(ids), out_dev = gpu_empty({tokens, c});
  cuda_kernel<ops::EmbeddingForwardKernel>()(gpu(weight), ids_dev, out_dev);
  EXPECT_TRUE(bitwise_equal(host(out_dev), out));

  // Both backends add each element's contributions in token order: identical sums.
  Tensor dout = randn({tokens, c}, 20);
  Tensor dw = Tensor::zeros({vocab, c});
  cpu_kernel<ops::EmbeddingBackwardKernel>()(ids, dout, dw);
  Tensor dw_dev = gpu(Tensor::zeros({vocab, c}));
  cuda_kernel<ops::EmbeddingBackwardKernel>()(ids_dev, gpu(dout), dw_dev);
  EXPECT_TRUE(bitwise_equal(host(dw_dev), dw));
}

// Checks a GEMM result against the CPU's: both are fp32 sums of k products in some order, so
// each element may differ by up to 2 k eps (|alpha| |A| |B|)_ij + 2 eps |beta c0|_ij.
void expect_gemm_close(const Tensor& actual, const Tensor& expected, const Tensor& abs_product,
                       const Tensor& c0, int64_t k, float alpha, float beta) {
  const std::vector<double> a = to_double(actual), e = to_double(expected);
  const std::vector<double> bound_ab = to_double(abs_product), start = to_double(c0);
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double bound = 2.0 * k * kEps * std::abs(alpha) * bound_ab[i] +
                         2.0 * kEps * std::abs(beta * start[i]) + 1e-30;
    ASSERT_LE(std::abs(a[i] - e[i]), bound)
        << "element " << testing::index_str(actual.shape(), static_cast<int64_t>(i)) << ": " << a[i]
        << " vs " << e[i];
  }
}

Tensor abs_of(const Tensor& t) {
  std::vector<float> v = t.detach().contiguous().to_vector();
  for (float& x : v) x = std::abs(x);
  return Tensor::from_vector(v, t.shape());
}

TEST(CudaKernels, GemmMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  struct Case {
    const char* name;
    Tensor a, b;  // host views
    bool ta, tb;
    Shape c;
  };
  // Dense bases; the cases view them row- or column-major, batched or not.
  Tensor a_base = randn({4096}, 21), b_base = randn({4096}, 22);
  Tensor a_dev = gpu(a_base), b_dev = gpu(b_base);
  const std::vector<Case> cases = {
      {"plain",
       a_base.alias({33, 17}, {17, 1}, 0),
       b_base.alias({17, 29}, {29, 1}, 0),
       false,
       false,
       {33, 29}},
      {"a^T",
       a_base.alias({17, 33}, {33, 1}, 0),
       b_base.alias({17, 29}, {29, 1}, 0),
       true,
       false,
       {33, 29}},
      {"b^T",
       a_base.alias({33, 17}, {17, 1}, 0),
       b_base.alias({29, 17}, {17, 1}, 0),
       false,
       true,
       {33, 29}},
      {"column-major a and b",
       a_base.alias({33, 17}, {1, 40}, 2),
       b_base.alias({17, 29}, {1, 17}, 0),
       false,
       false,
       {33, 29}},
      {"column-major a^T",
       a_base.alias({17, 33}, {1, 17}, 0),
       b_base.alias({29, 17}, {17, 1}, 0),
       true,
       true,
       {33, 29}},
      {"vector",
       a_base.alias({1, 17}, {17, 1}, 0),
       b_base.alias({17, 1}, {1, 1}, 0),
       false,
       false,
       {1, 1}},
      {"batched",
       a_base.alias({3, 4, 9, 7}, {252, 63, 7, 1}, 0),
       b_base.alias({3, 4, 7, 5}, {140, 35, 5, 1}, 0),
       false,
       false,
       {3, 4, 9, 5}},
      {"shared b",
       a_base.alias({3, 4, 9, 7}, {252, 63, 7, 1}, 0),
       b_base.alias({7, 5}, {5, 1}, 0),
       false,
       false,
       {3, 4, 9, 5}},
      // Batch dims that do not merge (heads-major over a [B, T, H, D] buffer): host loop.
      {"unmerged batch",
       a_base.alias({2, 3, 8, 6}, {144, 6, 18, 1}, 0),
       b_base.alias({2, 3, 8, 6}, {144, 6, 18, 1}, 0),
       false,
       true,
       {2, 3, 8, 8}},
  };
  for (const Case& c : cases) {
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-0.5f, 0.75f}}) {
      SCOPED_TRACE(::testing::Message() << c.name << " alpha " << alpha << " beta " << beta);
      Tensor c0 = randn(c.c, 23);
      Tensor expected = c0.clone();
      cpu_kernel<ops::GemmKernel>()(c.a, c.ta, c.b, c.tb, alpha, beta, expected);
      Tensor out = gpu(c0);
      cuda_kernel<ops::GemmKernel>()(same_view(a_dev, c.a), c.ta, same_view(b_dev, c.b), c.tb,
                                     alpha, beta, out);
      Tensor abs_product = Tensor::zeros(c.c);
      cpu_kernel<ops::GemmKernel>()(abs_of(c.a), c.ta, abs_of(c.b), c.tb, 1.0f, 0.0f, abs_product);
      const int64_t k = c.ta ? c.a.size(-2) : c.a.size(-1);
      expect_gemm_close(host(out), expected, abs_product, c0, k, alpha, beta);
    }
  }
}

// Runs attention forward and backward on both backends and compares every output.
void check_attention(int64_t B, int64_t H, int64_t T, int64_t D, bool causal, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "B" << B << " H" << H << " T" << T << " D" << D << (causal ? " causal" : ""));
  const Shape s{B, H, T, D};
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // q, k, v as views into one fused [B, T, 3, H, D] buffer, as causal_self_attention passes.
  Tensor qkv = randn({B, T, 3 * H * D}, seed);
  auto part = [&](const Tensor& base, int i) {
    return base.alias(s, {T * 3 * H * D, D, 3 * H * D, 1}, base.offset() + i * H * D);
  };
  Tensor q = part(qkv, 0), k = part(qkv, 1), v = part(qkv, 2);
  Tensor out = Tensor::empty(s), lse = Tensor::empty({B, H, T});
  cpu_kernel<ops::AttentionForwardKernel>()(q, k, v, causal, scale, out, lse);
  Tensor qkv_dev = gpu(qkv);
  Tensor qd = part(qkv_dev, 0), kd = part(qkv_dev, 1), vd = part(qkv_dev, 2);
  Tensor out_dev = gpu_empty(s), lse_dev = gpu_empty({B, H, T});
  cuda_kernel<ops::AttentionForwardKernel>()(qd, kd, vd, causal, scale, out_dev, lse_dev);
  // A score is a D-term dot product (then scaled) whose terms sum to ~ D E|q k| = 0.64 D: it
  // errs by <= D eps 0.64 D scale, which exp turns into that relative error of each P. out
  // averages v (|v| <= ~4) with those weights; lse adds the T-term sum's error.
  const double score_err = D * kEps * 0.64 * D * scale;
  const double tol = 4 * score_err + (D + T) * kEps * 4;
  expect_close(host(lse_dev), lse, 0.0, tol);
  expect_close(host(out_dev), out, tol, tol);

  // Backward from the CPU's out and lse, so only the backward's own rounding is compared.
  Tensor dout = randn(s, seed + 1);
  Tensor dq = Tensor::empty(s), dk = Tensor::empty(s), dv = Tensor::empty(s);
  cpu_kernel<ops::AttentionBackwardKernel>()(q, k, v, out, lse, dout, causal, scale, dq, dk, dv);
  Tensor dq_dev = gpu_empty(s), dk_dev = gpu_empty(s), dv_dev = gpu_empty(s);
  Tensor out_h = gpu(out), lse_h = gpu(lse), dout_dev = gpu(dout);
  cuda_kernel<ops::AttentionBackwardKernel>()(qd, kd, vd, out_h, lse_h, dout_dev, causal, scale,
                                              dq_dev, dk_dev, dv_dev);
  // dS = P (dP - delta) * scale subtracts two D-term dot products whose terms sum to about
  // D E|dout v| = 0.64 D: absolute error <= D eps 0.64 D per dS, like score_err. dq sums
  // P-weighted (sum P = 1) dS k with |k| <= ~4; dk sums over queries, whose P on one key add up
  // to a few (<= 5 here). Hence score_err * 4 * 5, on top of the forward's tolerance.
  const double grad_tol = score_err * 4 * 5 + tol;
  expect_close(host(dv_dev), dv, tol, tol);
  expect_close(host(dk_dev), dk, grad_tol, grad_tol);
  expect_close(host(dq_dev), dq, grad_tol, grad_tol);

  // Atomic-free: a second backward gives the same bits.
  Tensor dq2 = gpu_empty(s), dk2 = gpu_empty(s), dv2 = gpu_empty(s);
  cuda_kernel<ops::AttentionBackwardKernel>()(qd, kd, vd, out_h, lse_h, dout_dev, causal, scale,
                                              dq2, dk2, dv2);
  EXPECT_TRUE(bitwise_equal(host(dq2), host(dq_dev)));
  EXPECT_TRUE(bitwise_equal(host(dk2), host(dk_dev)));
}

TEST(CudaKernels, AttentionMatchesCpu) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  check_attention(2, 3, 50, 40, true, 30);  // T and D not multiples of the tiles
  check_attention(2, 3, 50, 40, false, 31);
  check_attention(1, 2, 70, 128, true, 32);  // the largest head dim: > 48 KiB shared memory
  check_attention(1, 1, 1, 1, false, 33);
}

TEST(CudaKernels, AdamWMatchesCpuBitwise) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  // The checkpoint design replays device updates on the host: every bit must agree.
  const Shape shape{1001};
  Tensor p = randn(shape, 40), m = randn(shape, 41, 0.1f), v = uniform(shape, 42, 0.0f, 0.01f);
  Tensor p_dev = gpu(p), m_dev = gpu(m), v_dev = gpu(v);
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    Tensor g = randn(shape, 43 + static_cast<uint64_t>(step));
    const ops::AdamWHyper hp{3e-3f / static_cast<float>(step), 0.9f, 0.95f, 1e-8f, 0.1f, step};
    cpu_kernel<ops::AdamWKernel>()(p, g, m, v, hp, 0.5f);
    cuda_kernel<ops::AdamWKernel>()(p_dev, gpu(g), m_dev, v_dev, hp, 0.5f);
    EXPECT_TRUE(bitwise_equal(host(m_dev), m));
    EXPECT_TRUE(bitwise_equal(host(v_dev), v));
    EXPECT_TRUE(bitwise_equal(host(p_dev), p));
  }
}

TEST(CudaKernels, AdamWGroupMatchesCpuBitwise) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  // Sizes on both sides of the CPU kernel's split threshold, each with its own step and decay.
  const int64_t sizes[] = {50000, 7, 1001};
  std::vector<Tensor> p, g, m, v, p_dev, g_dev, m_dev, v_dev;
  std::vector<ops::AdamWUpdate> cpu_updates, cuda_updates;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const uint64_t seed = 60 + 4 * i;
    p.push_back(randn({sizes[i]}, seed));
    g.push_back(randn({sizes[i]}, seed + 1));
    m.push_back(randn({sizes[i]}, seed + 2, 0.1f));
    v.push_back(uniform({sizes[i]}, seed + 3, 0.0f, 0.01f));
  }
  for (size_t i = 0; i < p.size(); ++i) {
    p_dev.push_back(gpu(p[i]));
    g_dev.push_back(gpu(g[i]));
    m_dev.push_back(gpu(m[i]));
    v_dev.push_back(gpu(v[i]));
  }
  for (size_t i = 0; i < p.size(); ++i) {
    const ops::AdamWHyper hp{
        1e-3f * static_cast<float>(i + 1), 0.9f, 0.95f, 1e-8f, i == 1 ? 0.0f : 0.1f,
        static_cast<int64_t>(i + 1)};
    cpu_updates.push_back({&p[i], &g[i], &m[i], &v[i], hp});
    cuda_updates.push_back({&p_dev[i], &g_dev[i], &m_dev[i], &v_dev[i], hp});
  }
  cpu_kernel<ops::AdamWGroupKernel>()(cpu_updates, 0.25f);
  cuda_kernel<ops::AdamWGroupKernel>()(cuda_updates, 0.25f);
  for (size_t i = 0; i < p.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "update " << i);
    EXPECT_TRUE(bitwise_equal(host(m_dev[i]), m[i]));
    EXPECT_TRUE(bitwise_equal(host(v_dev[i]), v[i]));
    EXPECT_TRUE(bitwise_equal(host(p_dev[i]), p[i]));
  }
}

TEST(CudaKernels, SgdMatchesCpuBitwise) {
  if (braid::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Shape shape{777};
  for (float momentum : {0.0f, 0.9f}) {
    SCOPED_TRACE(::testing::Message() << "momentum " << momentum);
    Tensor p = randn(shape, 50), buf = Tensor::zeros(shape);
    Tensor p_dev = gpu(p), buf_dev = gpu(buf);
    for (int step = 1; step <= 3; ++step) {
      Tensor g = randn(shape, 51 + static_cast<uint64_t>(step));
      cpu_kernel<ops::SgdKernel>()(p, g, buf, 0.05f, momentum, 0.01f, 2.0f, step == 1);
      cuda_kernel<ops::SgdKernel>()(p_dev, gpu(g), buf_dev, 0.05f, momentum, 0.01f, 2.0f,
                                    step == 1);
      EXPECT_TRUE(bitwise_equal(host(p_dev), p));
      if (momentum != 0.0f) EXPECT_TRUE(bitwise_equal(host(buf_dev), buf));
    }
  }
}

// =========================== host-only tests (no device needed) =============================

TEST(CudaHost, DeviceCountNeverThrows) {
  int n = -1;
  EXPECT_NO_THROW(n = cuda::device_count());
  EXPECT_GE(n, 0);
}

TEST(CudaHost, EveryKernelIsRegistered) {
  cuda::ensure_registered();
  for (const char* op :
       {"binary", "affine", "sum_to", "sum", "gemm", "gelu_forward", "gelu_backward",
        "softmax_forward", "softmax_backward", "layer_norm_forward", "layer_norm_backward",
        "attention_forward", "attention_backward", "embedding_forward", "embedding_backward",
        "cross_entropy_forward", "cross_entropy_backward", "adamw", "sgd"})
    EXPECT_TRUE(KernelRegistry::instance().has(op, DeviceKind::cuda)) << op;
  // A second list: clang-format lays one of over 20 names out one per line.
  for (const char* op :
       {"vocab_shard_max", "vocab_shard_sum_exp", "vocab_shard_backward", "vocab_shard_targets",
        "vocab_shard_loss", "vocab_shard_ids", "copy", "fill"})
    EXPECT_TRUE(KernelRegistry::instance().has(op, DeviceKind::cuda)) << op;
  EXPECT_NO_THROW(device_memory(DeviceKind::cuda));
}

TEST(CudaHost, AllocationWithoutDeviceFailsClearly) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  cuda::ensure_registered();
  EXPECT_ERROR_CONTAINS(Tensor::empty({4}, DType::f32, Device::cuda()), "no CUDA device");
}

// A tensor that claims to live on cuda:0 but wraps host memory: argument checks run on the
// host before anything touches a device, so they can be exercised without one.
Tensor fake_cuda(const Shape& shape, DType dtype = DType::f32) {
  const size_t bytes =
      static_cast<size_t>(std::max<int64_t>(shape_numel(shape), 1)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(std::malloc(bytes), bytes, Device::cuda(0),
                                           [](void* p) { std::free(p); });
  return Tensor::from_storage(storage, shape, dtype);
}

TEST(CudaHost, ArgumentChecksRunBeforeAnyLaunch) {
  Tensor host_x = randn({4, 8}, 60);
  Tensor host_y = Tensor::empty({4, 8});
  EXPECT_ERROR_CONTAINS(cuda::gelu_forward(host_x, host_y), "must be on a cuda device");
  const Tensor x = fake_cuda({4, 8});
  Tensor y_wrong = fake_cuda({4, 9});
  EXPECT_ERROR_CONTAINS(cuda::gelu_forward(x, y_wrong), "y must have shape [4, 8]");
  Tensor ids_f32 = fake_cuda({4});
  Tensor out = fake_cuda({4, 8});
  EXPECT_ERROR_CONTAINS(cuda::embedding_forward(x, ids_f32, out), "ids must be i32");
  Tensor transposed = x.alias({8, 4}, {1, 8}, 0);
  Tensor y84 = fake_cuda({8, 4});
  EXPECT_ERROR_CONTAINS(cuda::gelu_forward(transposed, y84), "must be contiguous");
  Tensor broadcast_out = fake_cuda({8}).alias({4, 8}, {0, 1}, 0);
  EXPECT_ERROR_CONTAINS(cuda::binary(BinaryOp::add, x, x, broadcast_out), "zero stride");
  Tensor c = fake_cuda({4, 4});
  EXPECT_ERROR_CONTAINS(cuda::gemm(x, false, x, false, 1.0f, 0.0f, c), "do not chain");
  const Tensor q = fake_cuda({1, 2, 3, 129});
  Tensor o = fake_cuda({1, 2, 3, 129}), lse = fake_cuda({1, 2, 3});
  EXPECT_ERROR_CONTAINS(cuda::attention_forward(q, q, q, true, 1.0f, o, lse), "head dim 129");
  Tensor dw = fake_cuda({8}), db = fake_cuda({7});
  Tensor mean = fake_cuda({4}), rstd = fake_cuda({4}), dx = fake_cuda({4, 8});
  EXPECT_ERROR_CONTAINS(cuda::layer_norm_backward(x, fake_cuda({8}), mean, rstd, x, dx, dw, db),
                        "dbias must have shape [8]");
  EXPECT_ERROR_CONTAINS(cuda::vocab_shard_max(x, 9, mean), "valid 9 must be in [0, 8]");
  EXPECT_ERROR_CONTAINS(cuda::copy(x, broadcast_out), "dst f32[4, 8] has a zero stride");
  EXPECT_ERROR_CONTAINS(cuda::copy(host_x, y84), "src must be on a cuda device");
  EXPECT_ERROR_CONTAINS(cuda::copy(x, y84), "src must have shape [8, 4]");
  EXPECT_ERROR_CONTAINS(cuda::fill(1.0f, broadcast_out), "zero stride");
  // Well-formed arguments reach the device guard, which reports the missing device cleanly.
  if (cuda::device_count() == 0) {
    Tensor y = fake_cuda({4, 8});
    EXPECT_ERROR_CONTAINS(cuda::gelu_forward(x, y), "no CUDA device");
  }
}

TEST(CudaHost, CollapseLayoutMergesWhatEveryOperandAllows) {
  // [B, T, C] + [C]: the row broadcast walks [B*T, C].
  const Shape shape{2, 3, 4};
  const Shape dense = contiguous_strides(shape), row{0, 0, 1};
  const Shape* two[] = {&dense, &row};
  cuda::StridedLayout l = cuda::collapse_layout(shape, two, 2);
  ASSERT_EQ(l.rank, 2);
  EXPECT_EQ(l.sizes[0], 6);
  EXPECT_EQ(l.sizes[1], 4);
  EXPECT_EQ(l.strides[1][0], 0);
  EXPECT_EQ(l.strides[0][0], 4);
  EXPECT_FALSE(l.dense());
  // All dense: one dim, unit strides.
  const Shape* same[] = {&dense, &dense};
  l = cuda::collapse_layout(shape, same, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_TRUE(l.dense());
  EXPECT_EQ(l.numel(), 24);
  // Size-1 dims vanish whatever their stride; a scalar has rank 0.
  const Shape ones{1, 5, 1}, odd{99, 1, 77};
  const Shape* one[] = {&odd};
  l = cuda::collapse_layout(ones, one, 1);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.strides[0][0], 1);
  const Shape scalar{}, none{};
  const Shape* empty[] = {&none};
  EXPECT_EQ(cuda::collapse_layout(scalar, empty, 1).rank, 0);
  // A transposed operand blocks the merge.
  const Shape t2{3, 4}, ts{1, 3}, ds{4, 1};
  const Shape* mixed[] = {&ts, &ds};
  EXPECT_EQ(cuda::collapse_layout(t2, mixed, 2).rank, 2);
  // Too many unmergeable dims is an error, not a silent wrong answer.
  const Shape seven(7, 2), zig{64, 1, 32, 2, 16, 4, 8};  // no neighbours merge
  const Shape* too_many[] = {&zig};
  EXPECT_ERROR_CONTAINS(cuda::collapse_layout(seven, too_many, 1), "at most 6");
}

TEST(CudaHost, LaunchSizesStayWithinLimits) {
  EXPECT_EQ(cuda::grid_1d(1), 1u);
  EXPECT_EQ(cuda::grid_1d(257), 2u);
  EXPECT_EQ(cuda::grid_1d(int64_t{1} << 40), static_cast<unsigned>(cuda::kMaxGridBlocks));
  EXPECT_EQ(cuda::row_block_threads(1), 32);
  EXPECT_EQ(cuda::row_block_threads(100), 128);
  EXPECT_EQ(cuda::row_block_threads(50257), 512);
  EXPECT_EQ(cuda::row_block_threads(50257, 1024), 1024);
  EXPECT_EQ(cuda::sum_blocks(0), 1);
  EXPECT_EQ(cuda::sum_blocks(int64_t{1} << 40), cuda::kSumMaxBlocks);
  // Row chunks: cover every row, never an empty chunk, partials bounded.
  for (int64_t rows : {int64_t{1}, int64_t{256}, int64_t{257}, int64_t{8192}, int64_t{1} << 22}) {
    for (int64_t cols : {int64_t{1}, int64_t{768}, int64_t{1} << 22}) {
      const cuda::ChunkPlan plan = cuda::plan_chunks(rows, cols);
      EXPECT_GE(plan.chunks * plan.rows_per_chunk, rows) << rows << "x" << cols;
      EXPECT_LT((plan.chunks - 1) * plan.rows_per_chunk, rows) << rows << "x" << cols;
      EXPECT_LE(plan.chunks, cuda::kMaxChunks);
      EXPECT_TRUE(plan.chunks == 1 || plan.chunks * cols <= cuda::kMaxPartials);
    }
  }
  const cuda::EmbeddingBackwardGrid eg = cuda::plan_embedding_backward(50257, 768);
  EXPECT_EQ(eg.column_blocks, 6);
  EXPECT_GE(eg.column_blocks * eg.partitions, 256);
  EXPECT_EQ(cuda::plan_embedding_backward(3, 768).partitions, 3);  // never more than the vocab
}

TEST(CudaHost, SumToPlanFindsTheFastPath) {
  const Tensor x = fake_cuda({6, 300, 24});
  EXPECT_TRUE(cuda::plan_sum_to(x, fake_cuda({24})).trailing_block);
  EXPECT_TRUE(cuda::plan_sum_to(x, fake_cuda({1, 300, 24})).trailing_block);
  EXPECT_TRUE(cuda::plan_sum_to(x, fake_cuda({})).trailing_block);
  const cuda::SumToPlan mid = cuda::plan_sum_to(x, fake_cuda({6, 1, 24}));
  EXPECT_FALSE(mid.trailing_block);
  EXPECT_EQ(mid.kept.numel(), 6 * 24);
  EXPECT_EQ(mid.reduced.numel(), 300);
  EXPECT_ERROR_CONTAINS(cuda::plan_sum_to(x, fake_cuda({5})), "does not broadcast");
}

TEST(CudaHost, GemmPlanMapsRowMajorToCublas) {
  // Row-major c = a @ b is column-major c^T = b^T a^T: cuBLAS sees b first, untransposed.
  cuda::GemmPlan p =
      cuda::plan_gemm(fake_cuda({33, 17}), false, fake_cuda({17, 29}), false, fake_cuda({33, 29}));
  EXPECT_EQ(p.m, 33);
  EXPECT_EQ(p.n, 29);
  EXPECT_EQ(p.k, 17);
  EXPECT_FALSE(p.blas_trans_a);
  EXPECT_FALSE(p.blas_trans_b);
  EXPECT_EQ(p.lda, 17);
  EXPECT_EQ(p.ldb, 29);
  EXPECT_EQ(p.ldc, 29);
  EXPECT_EQ(p.batch.rank, 0);
  // A column-major a (a transposed view) flips its op instead of being copied.
  Tensor a_cm = fake_cuda({17, 33}).alias({33, 17}, {1, 33}, 0);
  p = cuda::plan_gemm(a_cm, false, fake_cuda({17, 29}), false, fake_cuda({33, 29}));
  EXPECT_TRUE(p.blas_trans_a);
  EXPECT_EQ(p.lda, 33);
  // [B, H] batches of a dense buffer merge into one strided batch; a shared b has stride 0.
  p = cuda::plan_gemm(fake_cuda({3, 4, 9, 7}), false, fake_cuda({7, 5}), false,
                      fake_cuda({3, 4, 9, 5}));
  ASSERT_EQ(p.batch.rank, 1);
  EXPECT_EQ(p.batch.sizes[0], 12);
  EXPECT_EQ(p.batch.strides[0][0], 63);
  EXPECT_EQ(p.batch.strides[1][0], 0);
  EXPECT_EQ(p.batch.strides[2][0], 45);
  // Neither row- nor column-major: refused with the strides in the message.
  Tensor strided = fake_cuda({64}).alias({4, 4}, {8, 2}, 0);
  EXPECT_ERROR_CONTAINS(
      cuda::plan_gemm(strided, false, fake_cuda({4, 4}), false, fake_cuda({4, 4})),
      "neither row- nor column-major");
}

TEST(CudaHost, AttentionPlanSizesSharedMemory) {
  const cuda::AttentionLaunch p = cuda::plan_attention(8, 12, 1024, 64);
  EXPECT_EQ(p.heads, 96);
  EXPECT_EQ(p.query_tiles, 1024 / cuda::kAttentionQueryTile);
  EXPECT_EQ(p.key_tiles, 1024 / cuda::kAttentionKeyTile);
  EXPECT_LE(p.forward_smem_bytes, 48u * 1024);
  EXPECT_LE(p.backward_smem_bytes, 48u * 1024);
  const cuda::AttentionLaunch big = cuda::plan_attention(1, 1, 5, 128);
  EXPECT_EQ(big.query_tiles, 1);
  EXPECT_LE(big.forward_smem_bytes, 48u * 1024);
  EXPECT_GT(big.backward_smem_bytes, 48u * 1024);   // takes the opt-in path
  EXPECT_LE(big.backward_smem_bytes, 160u * 1024);  // and fits an A100's 163 KiB
  EXPECT_ERROR_CONTAINS(cuda::plan_attention(1, 1, 5, 0), "head dim 0");
}

// The AdamW and SGD kernels' per-element arithmetic, replayed on the host with plain float
// operations (this file is compiled without FMA, so each operation rounds once, like the
// kernels' __fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn). Matching the CPU kernel bit for bit
// here is what the device test then asks of the GPU; a mismatch means the CPU build contracts
// or reorders (it must be compiled with -ffp-contract=off).
TEST(CudaHost, AdamWDeviceOrderMatchesCpuKernel) {
  const Shape shape{1001};
  Tensor p = randn(shape, 70), m = randn(shape, 71, 0.1f), v = uniform(shape, 72, 0.0f, 0.01f);
  Tensor g = randn(shape, 73);
  const ops::AdamWHyper hp{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7};
  const float grad_scale = 0.5f;
  std::vector<float> pv = p.to_vector(), mv = m.to_vector(), vv = v.to_vector();
  const std::vector<float> gv = g.to_vector();
  const cuda::AdamWScalars s = cuda::adamw_scalars(hp, grad_scale);
  for (size_t i = 0; i < pv.size(); ++i) {
    volatile float gi = gv[i] * s.grad_scale;  // volatile: one rounding per statement
    volatile float a = s.beta1 * mv[i], b = s.one_minus_beta1 * gi;
    volatile float mi = a + b;
    volatile float c = s.beta2 * vv[i], d = s.one_minus_beta2 * gi;
    volatile float e = d * gi;
    volatile float vi = c + e;
    volatile float root = std::sqrt(static_cast<float>(vi));
    volatile float q = root / s.bias2_sqrt;
    volatile float denom = q + s.eps;
    volatile float ratio = mi / denom;
    volatile float decayed = pv[i] * s.decay, delta = s.step_size * ratio;
    pv[i] = decayed - delta;
    mv[i] = mi;
    vv[i] = vi;
  }
  cpu_kernel<ops::AdamWKernel>()(p, g, m, v, hp, grad_scale);
  EXPECT_TRUE(bitwise_equal(m, Tensor::from_vector(mv, shape)));
  EXPECT_TRUE(bitwise_equal(v, Tensor::from_vector(vv, shape)));
  EXPECT_TRUE(bitwise_equal(p, Tensor::from_vector(pv, shape)));
}

TEST(CudaHost, SgdDeviceOrderMatchesCpuKernel) {
  const Shape shape{777};
  Tensor p = randn(shape, 80), buf = randn(shape, 81), g = randn(shape, 82);
  const float lr = 0.05f, momentum = 0.9f, wd = 0.01f, grad_scale = 2.0f;
  std::vector<float> pv = p.to_vector(), bv = buf.to_vector();
  const std::vector<float> gv = g.to_vector();
  for (size_t i = 0; i < pv.size(); ++i) {
    volatile float a = gv[i] * grad_scale, b = wd * pv[i];
    volatile float dir = a + b;
    volatile float mb = momentum * bv[i];
    volatile float nb = mb + dir;
    bv[i] = nb;
    volatile float step = lr * nb;
    pv[i] = pv[i] - step;
  }
  cpu_kernel<ops::SgdKernel>()(p, g, buf, lr, momentum, wd, grad_scale, false);
  EXPECT_TRUE(bitwise_equal(buf, Tensor::from_vector(bv, shape)));
  EXPECT_TRUE(bitwise_equal(p, Tensor::from_vector(pv, shape)));
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_CUDA
