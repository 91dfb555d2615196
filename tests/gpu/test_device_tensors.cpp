// Device tensors at the level users see them: every Tensor method and every op of braid/ops on
// cuda tensors against the same on the CPU (forward and backward), device mismatches, views,
// and a small GPT. Skips without a device; in CI it runs on the emulated device
// (braid_test_gpu_simt), whose memory faults on any host read or write, so a pass also proves
// that none of these paths touches device memory from the host.
//
// Tolerances: where the device runs the CPU's operations in the CPU's order (copies, fills,
// views, binary ops, affine scaling, gathers, the embedding's ordered scatter) results must be
// bitwise equal. Elsewhere each bound is the fp32 worst case of the difference named where it
// is used (summation order, exp/tanh implementations), as in test_cuda_kernels.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/autograd/grad_mode.h"
#include "braid/core/tensor.h"
#include "braid/nn/gpt.h"
#include "braid/ops.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "support/test_util.h"

#ifdef BRAID_WITH_CUDA
#include "cuda_runtime.cuh"
#endif

#ifndef BRAID_WITH_CUDA

TEST(DeviceTensors, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA";
}

#else

namespace braid {
namespace {

using testing::bitwise_equal;
using testing::expect_close;
using testing::randn;
using testing::to_double;

// fp32 unit roundoff (half an ulp at 1): the unit of the tolerances below.
constexpr double kEps = 5.96e-8;

#define SKIP_WITHOUT_DEVICE() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"

Device gpu_device() {
  cuda::ensure_registered();
  return Device::cuda(0);
}
Tensor gpu(const Tensor& t) {
  return t.to(gpu_device());
}
Tensor host(const Tensor& t) {
  return t.to(Device::cpu());
}

// The raw bytes of a host tensor's whole storage (views compare what they did and did not
// write).
std::vector<uint8_t> storage_bytes(const Tensor& host_tensor) {
  const auto* p = static_cast<const uint8_t*>(host_tensor.storage()->data());
  return std::vector<uint8_t>(p, p + host_tensor.storage()->bytes());
}
// The raw bytes of a device tensor's whole storage, read through a copy of the storage.
std::vector<uint8_t> device_storage_bytes(const Tensor& t) {
  const int64_t n = static_cast<int64_t>(t.storage()->bytes());
  Tensor all = Tensor::from_storage(t.storage(), {n}, DType::u8);
  return storage_bytes(host(all));
}

// Elements of every dtype: values each dtype holds exactly, and for the float dtypes the cases
// a conversion has to get right (ties, subnormals, infinities, NaN, signed zero).
std::vector<float> float_cases() {
  const float inf = std::numeric_limits<float>::infinity();
  return {0.0f, -0.0f, 1.0f, -2.5f, 255.0f, 0.333333f, -17.0f,
          // ties to even in bf16 (1 + 2^-8 rounds down, 1 + 3 2^-8 up) and in f16 (2^-11)
          1.0f + 1.0f / 256, -(1.0f + 3.0f / 256), 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
          // f16 subnormals, their ties (2^-25 rounds to 0, 3 2^-25 to 2^-23), underflow
          6.0e-5f, 0x1p-25f, 0x3p-25f, 3.0e-8f, -1.0e-40f,
          // f16's largest finite value and the first that overflows; f32's range; NaN
          65504.0f, 65520.0f, 3.4e38f, inf, -inf, std::nanf("")};
}
std::vector<float> integer_cases() {  // valid in every integer dtype, u8 included
  return {0, 1, 2, 7, 100, 255, 13, 64, 128, 200, 3, 9};
}

Tensor host_tensor_of(const std::vector<float>& values, DType dtype) {
  const Tensor f = Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
  return f.to(dtype);
}

constexpr DType kAllDtypes[] = {DType::f32, DType::bf16, DType::f16,
                                DType::i32, DType::i64,  DType::u8};

// ================================ Tensor methods ============================================

TEST(DeviceTensors, FactoriesPlaceTheirTensorsOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  const Device d = gpu_device();
  for (DType dt : kAllDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor z = Tensor::zeros({3, 5}, dt, d);
    EXPECT_EQ(z.device(), d);
    EXPECT_EQ(storage_bytes(host(z)), storage_bytes(Tensor::zeros({3, 5}, dt)));
    const Tensor f = Tensor::full({4, 3}, 7.0f, dt, d);
    EXPECT_EQ(f.device(), d);
    EXPECT_EQ(storage_bytes(host(f)), storage_bytes(Tensor::full({4, 3}, 7.0f, dt)));
  }
  const Tensor v = Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 3.25f}, {3}, d);
  EXPECT_EQ(v.device(), d);
  EXPECT_EQ(v.to_vector(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{4, -1, 1 << 30}, {3}, d);
  EXPECT_EQ(ids.device(), d);
  EXPECT_EQ(testing::ids_of(host(ids)), (std::vector<int32_t>{4, -1, 1 << 30}));
  // Empty tensors allocate nothing and fill nothing.
  EXPECT_EQ(Tensor::zeros({0, 4}, DType::f32, d).numel(), 0);
  EXPECT_EQ(Tensor::full({0}, 1.0f, DType::f32, d).to_vector(), std::vector<float>{});
}

TEST(DeviceTensors, FillMatchesTheCpuForEveryDtypeAndLayout) {
  SKIP_WITHOUT_DEVICE();
  for (DType dt : kAllDtypes) {
    for (float value : {0.0f, -3.0f, 2.5f, 1.0f + 1.0f / 512, 200.0f}) {
      if (dt == DType::u8 && value < 0) continue;  // undefined conversion in C++
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " value " << value);
      // A base of known contents, then fills of the whole, a transposed view and a narrowed
      // column range: elements outside the views must keep their values.
      const Tensor base_h = host_tensor_of(std::vector<float>(24, 9.0f), dt);
      Tensor cpu = base_h.clone().alias({4, 6}, {6, 1}, 0);
      Tensor dev = gpu(base_h).alias({4, 6}, {6, 1}, 0);
      cpu.narrow(1, 1, 3).fill_(value);
      dev.narrow(1, 1, 3).fill_(value);
      EXPECT_EQ(device_storage_bytes(dev), storage_bytes(cpu));
      cpu.transpose(0, 1).narrow(0, 4, 2).fill_(value + 1);
      dev.transpose(0, 1).narrow(0, 4, 2).fill_(value + 1);
      EXPECT_EQ(device_storage_bytes(dev), storage_bytes(cpu));
      cpu.fill_(value);
      dev.fill_(value);
      EXPECT_EQ(device_storage_bytes(dev), storage_bytes(cpu));
    }
  }
  // zero_() and a 0-d tensor.
  Tensor s = Tensor::full({}, 4.0f, DType::f32, gpu_device());
  s.zero_();
  EXPECT_EQ(s.item(), 0.0f);
}

TEST(DeviceTensors, CopyConvertsBetweenEveryPairOfDtypesLikeTheCpu) {
  SKIP_WITHOUT_DEVICE();
  for (DType st : kAllDtypes) {
    for (DType dt : kAllDtypes) {
      SCOPED_TRACE(::testing::Message() << dtype_name(st) << " -> " << dtype_name(dt));
      // Float to integer conversions are defined only in range: integer values there.
      const bool floats = is_floating(st) && is_floating(dt);
      const std::vector<float> values = floats ? float_cases() : integer_cases();
      const Tensor src_h = host_tensor_of(values, st);
      const int64_t n = src_h.numel();
      Tensor expected = Tensor::empty({n}, dt);
      expected.copy_(src_h);
      Tensor out = Tensor::empty({n}, dt, gpu_device());
      out.copy_(gpu(src_h));
      EXPECT_EQ(device_storage_bytes(out), storage_bytes(expected));
      // The same through strided views: every other source element into reversed positions
      // (a negative stride is not a braid layout; a transposed 2-d view stands in).
      const int64_t half = n / 2;
      Tensor src_view_h = src_h.alias({2, half / 2}, {1, 4}, 0);
      Tensor expected_view = Tensor::zeros({half / 2, 2}, dt);
      expected_view.transpose(0, 1).copy_(src_view_h);
      Tensor out_view = Tensor::zeros({half / 2, 2}, dt, gpu_device());
      out_view.transpose(0, 1).copy_(gpu(src_h).alias({2, half / 2}, {1, 4}, 0));
      EXPECT_EQ(device_storage_bytes(out_view), storage_bytes(expected_view));
    }
  }
  // i64 ids above 2^24 do not round through float.
  const Tensor big =
      Tensor::from_vector(std::vector<int32_t>{(1 << 24) + 1, -((1 << 30) + 3)}, {2});
  Tensor wide = Tensor::empty({2}, DType::i64, gpu_device());
  wide.copy_(gpu(big));
  Tensor back = Tensor::empty({2}, DType::i32, gpu_device());
  back.copy_(wide);
  EXPECT_EQ(testing::ids_of(host(back)), testing::ids_of(big));
}

TEST(DeviceTensors, CopyBroadcastsAndKeepsUntouchedElements) {
  SKIP_WITHOUT_DEVICE();
  const Tensor row = randn({5}, 31);
  const Tensor base = randn({3, 5}, 32);
  Tensor cpu = base.clone(), dev = gpu(base);
  // A zero-stride source (expand), into a strided destination (every other column).
  const Tensor expanded_h = row.narrow(0, 0, 3).alias({3, 3}, {0, 1}, 0);
  const Tensor expanded_d = gpu(row).narrow(0, 0, 3).alias({3, 3}, {0, 1}, 0);
  cpu.alias({3, 3}, {5, 2}, 0).copy_(expanded_h);
  dev.alias({3, 3}, {5, 2}, 0).copy_(expanded_d);
  EXPECT_TRUE(bitwise_equal(host(dev), cpu));
  // A broadcast destination is refused on the device (two threads would write one element).
  Tensor bad = dev.alias({3, 5}, {0, 1}, 0);
  EXPECT_ERROR_CONTAINS(bad.copy_(gpu(base)), "zero stride");
}

TEST(DeviceTensors, OverlappingDenseCopyIsAMemmove) {
  SKIP_WITHOUT_DEVICE();
  const Tensor values = randn({12}, 33);
  for (int64_t shift : {2, -2}) {
    SCOPED_TRACE(shift);
    Tensor cpu = values.clone(), dev = gpu(values);
    const int64_t from = shift > 0 ? 0 : 2, to = shift > 0 ? 2 : 0;
    cpu.narrow(0, to, 10).copy_(cpu.narrow(0, from, 10));
    dev.narrow(0, to, 10).copy_(dev.narrow(0, from, 10));
    EXPECT_TRUE(bitwise_equal(host(dev), cpu));
  }
}

TEST(DeviceTensors, CopiesOfMoreDimsThanTheKernelsIndex) {
  SKIP_WITHOUT_DEVICE();
  // 8 dims of size 2 with a transposed pair: more strided dims than kMaxDims = 6 before
  // merging, copied one outermost index at a time.
  const Shape shape(8, 2);
  const Tensor x = randn(shape, 34);
  Tensor view_h = x.transpose(0, 7).transpose(2, 5);
  Tensor view_d = gpu(x).transpose(0, 7).transpose(2, 5);
  EXPECT_TRUE(bitwise_equal(host(view_d.contiguous()), view_h.contiguous()));
  Tensor filled_h = x.clone(), filled_d = gpu(x);
  filled_h.transpose(1, 6).narrow(3, 1, 1).fill_(5.0f);
  filled_d.transpose(1, 6).narrow(3, 1, 1).fill_(5.0f);
  EXPECT_TRUE(bitwise_equal(host(filled_d), filled_h));
}

TEST(DeviceTensors, CopiesAcrossDevicesStageStridedAndConvertedSides) {
  SKIP_WITHOUT_DEVICE();
  const Tensor x = randn({4, 6}, 35);
  const Tensor xt = x.transpose(0, 1);  // strided host source
  // host strided -> device dense
  Tensor dense_d = Tensor::empty({6, 4}, DType::f32, gpu_device());
  dense_d.copy_(xt);
  EXPECT_TRUE(bitwise_equal(host(dense_d), xt.contiguous()));
  // device strided -> host strided
  Tensor out_h = Tensor::zeros({4, 6});
  out_h.transpose(0, 1).copy_(gpu(x).transpose(0, 1));
  EXPECT_TRUE(bitwise_equal(out_h, x));
  // host f32 -> device bf16 (converted on the host side), device bf16 -> host f32
  Tensor bf_d = Tensor::empty({6, 4}, DType::bf16, gpu_device());
  bf_d.copy_(xt);
  Tensor bf_h = Tensor::empty({6, 4}, DType::bf16);
  bf_h.copy_(xt);
  EXPECT_EQ(device_storage_bytes(bf_d), storage_bytes(bf_h));
  Tensor back = Tensor::empty({6, 4});
  back.copy_(bf_d);
  EXPECT_TRUE(bitwise_equal(back, bf_h.to(DType::f32)));
  // to(Device) of a strided view, both ways.
  EXPECT_TRUE(bitwise_equal(host(gpu(x).narrow(1, 2, 3)), x.narrow(1, 2, 3).contiguous()));
  if (cuda::device_count() >= 2) {
    const Tensor on1 = gpu(x).transpose(0, 1).to(Device::cuda(1));
    EXPECT_EQ(on1.device(), Device::cuda(1));
    EXPECT_TRUE(bitwise_equal(host(on1), xt.contiguous()));
  }
}

TEST(DeviceTensors, ItemToVectorCloneContiguousAndDtypes) {
  SKIP_WITHOUT_DEVICE();
  const Tensor x = randn({3, 4}, 36);
  const Tensor d = gpu(x);
  EXPECT_EQ(d.narrow(0, 2, 1).narrow(1, 3, 1).item(), x.narrow(0, 2, 1).narrow(1, 3, 1).item());
  EXPECT_EQ(d.transpose(0, 1).to_vector(), x.transpose(0, 1).to_vector());
  EXPECT_EQ(d.to(DType::bf16).to_vector(), x.to(DType::bf16).to_vector());
  const Tensor c = d.clone();
  EXPECT_EQ(c.device(), d.device());
  EXPECT_NE(c.storage(), d.storage());
  EXPECT_TRUE(bitwise_equal(host(c), x));
  const Tensor t = d.transpose(0, 1);
  EXPECT_FALSE(t.is_contiguous());
  const Tensor tc = t.contiguous();
  EXPECT_TRUE(tc.is_contiguous());
  EXPECT_EQ(tc.device(), d.device());
  EXPECT_TRUE(bitwise_equal(host(tc), x.transpose(0, 1).contiguous()));
  EXPECT_TRUE(d.contiguous().same(d));  // already dense: itself
  EXPECT_TRUE(d.detach().storage() == d.storage());
  // clone_all of device tensors stays on the device.
  const std::vector<Tensor> clones = clone_all({d, d.narrow(1, 1, 2)});
  EXPECT_EQ(clones[1].device(), d.device());
  EXPECT_TRUE(bitwise_equal(host(clones[1]), x.narrow(1, 1, 2).contiguous()));
  // rebind_ moves a tensor's memory into a device buffer (how a parameter moves).
  Tensor p = x.clone();
  Tensor flat = Tensor::zeros({20}, DType::f32, gpu_device());
  p.rebind_(flat.narrow(0, 4, 12).reshape({3, 4}));
  EXPECT_EQ(p.device(), d.device());
  EXPECT_TRUE(bitwise_equal(host(flat.narrow(0, 4, 12)).reshape({3, 4}), x));
}

TEST(DeviceTensors, ViewsOfDeviceTensorsThenContiguousAndCopy) {
  SKIP_WITHOUT_DEVICE();
  const Tensor x = randn({2, 3, 4}, 37);
  const Tensor d = gpu(x);
  struct View {
    const char* name;
    std::function<Tensor(const Tensor&)> make;
  };
  const std::vector<View> views = {
      {"transpose", [](const Tensor& t) { return t.transpose(0, 2); }},
      {"permute",
       [](const Tensor& t) {
         return t.permute({1, 2, 0});
       }},
      {"narrow", [](const Tensor& t) { return t.narrow(2, 1, 2); }},
      {"reshape (a view)",
       [](const Tensor& t) {
         return t.reshape({6, 4});
       }},
      {"reshape (a copy)",
       [](const Tensor& t) {
         return t.transpose(1, 2).reshape({2, 12});
       }},
      {"expand",
       [](const Tensor& t) {
         return t.narrow(0, 0, 1).alias({5, 3, 4}, {0, 4, 1}, 0);
       }},
  };
  for (const View& v : views) {
    SCOPED_TRACE(v.name);
    const Tensor vh = v.make(x), vd = v.make(d);
    EXPECT_EQ(vd.device(), d.device());
    EXPECT_EQ(vd.shape(), vh.shape());
    EXPECT_EQ(vd.strides(), vh.strides());
    EXPECT_TRUE(bitwise_equal(host(vd.contiguous()), vh.contiguous()));
    Tensor into_h = Tensor::zeros(vh.shape()),
           into_d = Tensor::zeros(vh.shape(), DType::f32, d.device());
    into_h.copy_(vh);
    into_d.copy_(vd);
    EXPECT_TRUE(bitwise_equal(host(into_d), into_h));
  }
}

// ================================ ops, forward and backward =================================

// One op configuration run on the CPU and on the device from the same values. The op gets its
// differentiable inputs on one device and builds whatever else it needs (ids, targets) there.
struct DeviceCase {
  std::string name;
  std::vector<Tensor> inputs;  // host f32 values of the differentiable inputs
  std::function<std::vector<Tensor>(const std::vector<Tensor>&, Device)> fn;
  double rtol = 0, atol = 0;            // outputs, device against CPU; (0, 0): bitwise
  double grad_rtol = 0, grad_atol = 0;  // input gradients; (0, 0): bitwise
};

void expect_match(const Tensor& device_result, const Tensor& cpu_result, double rtol, double atol) {
  ASSERT_EQ(device_result.device(), gpu_device()) << "the op left its result on the host";
  if (rtol == 0 && atol == 0)
    EXPECT_TRUE(bitwise_equal(host(device_result), cpu_result));
  else
    expect_close(host(device_result), cpu_result, rtol, atol);
}

// Forward on both devices, then backward from the same random output gradients, comparing
// every output and every input gradient.
void run_on_both(const DeviceCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<Tensor> in_h, in_d;
  for (const Tensor& t : c.inputs) {
    in_h.push_back(t.clone().set_requires_grad(true));
    in_d.push_back(gpu(t).set_requires_grad(true));
  }
  const std::vector<Tensor> out_h = c.fn(in_h, Device::cpu());
  const std::vector<Tensor> out_d = c.fn(in_d, gpu_device());
  ASSERT_EQ(out_h.size(), out_d.size());
  std::vector<Tensor> roots_h, roots_d, grads_h, grads_d;
  for (size_t k = 0; k < out_h.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    expect_match(out_d[k], out_h[k], c.rtol, c.atol);
    if (!out_h[k].requires_grad()) continue;
    const Tensor w = randn(out_h[k].shape(), 900 + k);
    roots_h.push_back(out_h[k]);
    roots_d.push_back(out_d[k]);
    grads_h.push_back(w);
    grads_d.push_back(gpu(w));
  }
  if (roots_h.empty()) return;
  autograd::backward(roots_h, grads_h);
  autograd::backward(roots_d, grads_d);
  for (size_t i = 0; i < in_h.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    const Tensor gh = in_h[i].grad(), gd = in_d[i].grad();
    ASSERT_EQ(gh.defined(), gd.defined());
    if (gh.defined()) expect_match(gd, gh, c.grad_rtol, c.grad_atol);
  }
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : to_double(t)) m = std::max(m, std::abs(v));
  return m;
}

// Two fp32 sums of `terms` values whose magnitudes add up to at most `magnitude`, taken in
// different orders (or one in float, one in double), differ by at most terms * eps * magnitude.
double order_bound(int64_t terms, double magnitude) {
  return static_cast<double>(terms) * kEps * magnitude + 1e-30;
}

TEST(DeviceOps, Elementwise) {
  SKIP_WITHOUT_DEVICE();
  const Tensor a = randn({2, 3, 4}, 40), b = randn({4}, 41), c = randn({3, 1}, 42),
               d = randn({1, 4}, 43);
  // One IEEE operation per element on both sides: bitwise. Gradients of broadcast operands are
  // sums over the broadcast rows: the trailing-block sums are in double on both sides (at most
  // 1 ulp apart after rounding), the others in float on the CPU (order_bound).
  run_on_both(
      {"add_broadcast",
       {a, b},
       [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{add(x[0], x[1])}; },
       0,
       0,
       2 * kEps,
       order_bound(6, 6 * 4.0)});
  run_on_both(
      {"sub_outer",
       {c, d},
       [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{sub(x[0], x[1])}; },
       0,
       0,
       2 * kEps,
       order_bound(4, 4 * 4.0)});
  run_on_both(
      {"mul_broadcast",
       {a, b},
       [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{mul(x[0], x[1])}; },
       0,
       0,
       2 * kEps,
       order_bound(6, 6 * 16.0)});
  run_on_both({"mul_self", {a}, [](const std::vector<Tensor>& x, Device) {
                 return std::vector<Tensor>{mul(x[0], x[0])};
               }});
  // alpha x + 0 rounds once on both sides (a fused multiply-add of 0 is the product): bitwise.
  run_on_both({"scale_of_a_view", {a}, [](const std::vector<Tensor>& x, Device) {
                 return std::vector<Tensor>{scale(x[0].transpose(0, 2), -1.5f)};
               }});
}

TEST(DeviceOps, Reductions) {
  SKIP_WITHOUT_DEVICE();
  const Tensor x = randn({3, 5, 7}, 44);
  const double abs_sum = [&] {
    double s = 0;
    for (double v : to_double(x)) s += std::abs(v);
    return s;
  }();
  // The CPU adds float partials of 256-element blocks in double, the device sums in double:
  // order_bound over all 105 terms. The gradient spreads the incoming value (bitwise; mean's
  // 1/n is one rounding of the same product on both sides).
  run_on_both(
      {"sum",
       {x},
       [](const std::vector<Tensor>& in, Device) { return std::vector<Tensor>{sum(in[0])}; },
       0,
       order_bound(105, abs_sum)});
  run_on_both({"sum_of_a_view",
               {x},
               [](const std::vector<Tensor>& in, Device) {
                 return std::vector<Tensor>{sum(in[0].narrow(2, 1, 4).transpose(0, 1))};
               },
               0,
               order_bound(105, abs_sum)});
  // mean: the same sum, then s / n in double on the CPU but (float) s * (float) (1 / n) on the
  // device: 2 more roundings.
  run_on_both(
      {"mean",
       {x},
       [](const std::vector<Tensor>& in, Device) { return std::vector<Tensor>{mean(in[0])}; },
       3 * kEps,
       order_bound(105, abs_sum) / 105});
  // The reduction of a 0-d tensor is a new tensor, not the input.
  const Tensor three = Tensor::full({}, 3.0f, DType::f32, gpu_device());
  EXPECT_NE(sum(three).storage(), three.storage());
  EXPECT_EQ(mean(three).item(), 3.0f);
  // Without history: sum_to_shape (double sums on both sides of the trailing block; float on
  // the CPU otherwise), sum_of_squares (double on both, 105 terms), add_ and scale_ (bitwise).
  const Tensor xd = gpu(x);
  expect_match(sum_to_shape(xd, {5, 7}), sum_to_shape(x, {5, 7}), 2 * kEps, 1e-30);
  expect_match(sum_to_shape(xd, {3, 1, 7}), sum_to_shape(x, {3, 1, 7}), 0, order_bound(5, abs_sum));
  EXPECT_NEAR(sum_of_squares(xd), sum_of_squares(x), 105 * kEps * sum_of_squares(x));
  Tensor acc_h = x.clone(), acc_d = gpu(x);
  const Tensor row = randn({7}, 45);
  add_(acc_h, row);
  add_(acc_d, gpu(row));
  scale_(acc_h, 0.75f);
  scale_(acc_d, 0.75f);
  expect_match(acc_d, acc_h, 0, 0);
}

TEST(DeviceOps, MatmulAndLinear) {
  SKIP_WITHOUT_DEVICE();
  const Tensor a = randn({2, 3, 4}, 46), b = randn({2, 4, 5}, 47), b2 = randn({4, 5}, 48);
  const Tensor w = randn({5, 4}, 49), bias = randn({5}, 50);
  // GEMMs sum K products in different orders (cuBLAS, or the emulator's float64 reference,
  // against the CPU's sgemm): order_bound(K, K max|a| max|b|) per element. Randn values here
  // stay below 4 and the output gradients too, so every magnitude is bounded by 16 K.
  auto gemm_tol = [](int64_t k) { return order_bound(k + 1, 16.0 * (k + 1)); };
  run_on_both(
      {"matmul_batched",
       {a, b},
       [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{matmul(x[0], x[1])}; },
       0,
       gemm_tol(4),
       0,
       gemm_tol(6)});
  run_on_both(
      {"matmul_shared_b",
       {a, b2},
       [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{matmul(x[0], x[1])}; },
       0,
       gemm_tol(4),
       0,
       gemm_tol(6)});
  // The bias joins the sum as one more term (the CPU adds it inside the GEMM, the device starts
  // C from it); its gradient is a double column sum on both sides.
  run_on_both({"linear_bias",
               {a, w, bias},
               [](const std::vector<Tensor>& x, Device) {
                 return std::vector<Tensor>{linear(x[0], x[1], x[2])};
               },
               0,
               gemm_tol(5),
               0,
               gemm_tol(6)});
  run_on_both({"linear_no_bias_of_a_view",
               {a, w},
               [](const std::vector<Tensor>& x, Device) {
                 return std::vector<Tensor>{linear(x[0].transpose(0, 1), x[1])};
               },
               0,
               gemm_tol(4),
               0,
               gemm_tol(6)});
}

TEST(DeviceOps, ActivationsAndNorm) {
  SKIP_WITHOUT_DEVICE();
  const Tensor x = randn({2, 3, 8}, 51), lw = randn({8}, 52, 0.5f, 1.0f), lb = randn({8}, 53);
  // GELU: tanh differs by <= 4e-7 absolute (tanhf against the CPU's polynomial); y errs by
  // 0.5 |x| of that plus 4 ulp, dx by |dy| (0.5 + |x| dinner) of it, dinner <= 2.5 for |x| < 4
  // (test_cuda_kernels.cpp, GeluMatchesCpu).
  run_on_both(
      {"gelu",
       {x},
       [](const std::vector<Tensor>& in, Device) { return std::vector<Tensor>{gelu(in[0])}; },
       4 * kEps,
       0.5 * 4 * 4e-7,
       4 * kEps,
       4.0 * (0.5 + 4 * 2.5) * 4e-7});
  // softmax: 2-ulp exps and an 8-term sum: 1e-5 relative bounds both sides (the kernel test's
  // bound for 1000-term rows); its gradient subtracts an 8-term dot product.
  run_on_both(
      {"softmax",
       {x},
       [](const std::vector<Tensor>& in, Device) { return std::vector<Tensor>{softmax(in[0])}; },
       1e-5,
       1e-12,
       1e-5,
       order_bound(8, 8 * 4.0)});
  // layer_norm: mean and variance are 8-term float sums in different orders; the kernel test's
  // bounds for 768 terms (1e-4) cover these by far.
  run_on_both({"layer_norm",
               {x, lw, lb},
               [](const std::vector<Tensor>& in, Device) {
                 return std::vector<Tensor>{layer_norm(in[0], in[1], in[2], 1e-5f)};
               },
               1e-4,
               2e-4,
               1e-4,
               1e-4});
}

TEST(DeviceOps, Attention) {
  SKIP_WITHOUT_DEVICE();
  constexpr int64_t B = 2, H = 2, T = 5, D = 4;
  const Tensor q = randn({B, H, T, D}, 54), k = randn({B, H, T, D}, 55),
               v = randn({B, H, T, D}, 56), qkv = randn({B, T, 3 * H * D}, 57);
  // The kernel test's bounds (test_cuda_kernels.cpp, check_attention) for these sizes: a score
  // errs by D eps 0.64 D scale, out and lse by 4 of that plus (D + T) 4 eps; gradients by
  // another score_err * 4 * 5. One level of random output gradients (|g| < 4) scales them by 4.
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double score_err = D * kEps * 0.64 * D * scale;
  const double tol = 4 * score_err + (D + T) * kEps * 4;
  const double grad_tol = 4 * (score_err * 4 * 5 + tol);
  for (bool causal : {false, true}) {
    run_on_both({causal ? "attention_causal" : "attention",
                 {q, k, v},
                 [causal](const std::vector<Tensor>& x, Device) {
                   return std::vector<Tensor>{attention(x[0], x[1], x[2], causal)};
                 },
                 tol,
                 tol,
                 grad_tol,
                 grad_tol});
  }
  run_on_both({"causal_self_attention",
               {qkv},
               [](const std::vector<Tensor>& x, Device) {
                 return std::vector<Tensor>{causal_self_attention(x[0], H)};
               },
               tol,
               tol,
               grad_tol,
               grad_tol});
}

TEST(DeviceOps, EmbeddingAndCrossEntropy) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<int32_t> ids{3, 0, 3, 6, 1, 3, 0, 2};
  const Tensor table = randn({7, 5}, 58);
  // Gathers copy; both backward kernels add each row's contributions in token order: bitwise.
  run_on_both({"embedding", {table}, [ids](const std::vector<Tensor>& x, Device d) {
                 return std::vector<Tensor>{embedding(x[0], Tensor::from_vector(ids, {2, 4}, d))};
               }});
  // Straight into an existing .grad (the direct path, whose id grouping runs on the host copy
  // of the ids): bitwise too.
  {
    Tensor w_h = table.clone().set_requires_grad(true), w_d = gpu(table).set_requires_grad(true);
    w_h.set_grad(randn({7, 5}, 59));
    w_d.set_grad(gpu(randn({7, 5}, 59)));
    const Tensor g = randn({8, 5}, 60);
    embedding(w_h, Tensor::from_vector(ids, {8})).backward(g);
    embedding(w_d, Tensor::from_vector(ids, {8}, gpu_device())).backward(gpu(g));
    expect_match(w_d.grad(), w_h.grad(), 0, 0);
  }
  // cross_entropy: each row's loss within 1e-5 absolute (2-ulp exps in an lse of ~6, the
  // kernel test's bound), averaged in double on the CPU and as a double sum plus one multiply
  // on the device. The gradient exp(x - lse) inherits the lse difference as a relative one
  // (1e-5) plus 3.2 ulp of exp; the target entry keeps ~8 ulp of 1 / count absolute. Random
  // output gradients (|g| < 4) scale the absolute part; the device applies them in one more
  // rounding.
  const std::vector<int32_t> targets{2, -1, 5, 0, 4, -1};
  const Tensor logits = randn({2, 3, 6}, 61, 2.0f);
  const double ce_grad_rtol = 1e-5 + 6 * kEps, ce_grad_atol = 4 * 8 * kEps / 4;  // 4 counted
  run_on_both(
      {"cross_entropy_ignore_rows",
       {logits},
       [targets](const std::vector<Tensor>& x, Device d) {
         return std::vector<Tensor>{cross_entropy(x[0], Tensor::from_vector(targets, {2, 3}, d))};
       },
       1e-6,
       1e-5,
       ce_grad_rtol,
       ce_grad_atol});
  const std::vector<int32_t> padded_targets{4, 0, -1, 2, 1};
  run_on_both({"cross_entropy_padded_vocab",
               {randn({5, 8}, 62, 2.0f)},
               [padded_targets](const std::vector<Tensor>& x, Device d) {
                 return std::vector<Tensor>{
                     cross_entropy(x[0], Tensor::from_vector(padded_targets, {5}, d), 5)};
               },
               1e-6,
               1e-5,
               ce_grad_rtol,
               ce_grad_atol});
  // The loss as training uses it: logits of an op handed over by move, backward from the
  // default seed (a one on the device); add(l, l)'s gradient doubles exactly.
  Tensor l_h = logits.clone().set_requires_grad(true), l_d = gpu(logits).set_requires_grad(true);
  Tensor loss_h = cross_entropy(add(l_h, l_h), Tensor::from_vector(targets, {2, 3}));
  Tensor loss_d = cross_entropy(add(l_d, l_d), Tensor::from_vector(targets, {2, 3}, gpu_device()));
  expect_match(loss_d, loss_h, 1e-6, 2e-5);  // logits of twice the size: lse within 2e-5
  loss_h.backward();
  loss_d.backward();
  expect_match(l_d.grad(), l_h.grad(), 2e-5 + 6 * kEps, 2 * 8 * kEps / 4);
}

TEST(DeviceOps, ViewsCatAndSplit) {
  SKIP_WITHOUT_DEVICE();
  const Tensor x = randn({2, 3, 4}, 63), y = randn({2, 2, 4}, 64);
  // Views and copies move values: bitwise, forward and backward (narrow's gradient is zeros
  // with the slice copied in; split's is a cat).
  run_on_both({"views", {x}, [](const std::vector<Tensor>& in, Device) {
                 const Tensor t = in[0].transpose(0, 2);
                 return std::vector<Tensor>{reshape(in[0], {6, 4}),
                                            t,
                                            in[0].permute({1, 0, 2}),
                                            narrow(in[0], 1, 1, 2),
                                            contiguous(t),
                                            reshape(t, {24})};
               }});
  run_on_both({"cat_and_split", {x, y}, [](const std::vector<Tensor>& in, Device) {
                 std::vector<Tensor> out = split(in[0], {1, 2}, 1);
                 out.push_back(cat({in[0], in[1]}, 1));
                 return out;
               }});
}

TEST(DeviceOps, ASmallGraphBackwardMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
  // linear -> gelu -> layer_norm -> matmul -> softmax -> mean: every family in one graph, some
  // tensors used twice (the engine adds their gradients on the device). Each stage keeps its
  // own bound above (a few 1e-6 relative at these sizes); through six stages 1e-4 relative.
  const Tensor x = randn({3, 4, 6}, 65), w = randn({8, 6}, 66, 0.4f), b = randn({8}, 67),
               lw = randn({8}, 68, 0.2f, 1.0f), lb = randn({8}, 69, 0.2f), m = randn({8, 5}, 70);
  run_on_both({"graph",
               {x, w, b, lw, lb, m},
               [](const std::vector<Tensor>& in, Device) {
                 const Tensor h = gelu(linear(in[0], in[1], in[2]));
                 const Tensor n = layer_norm(add(h, h), in[3], in[4], 1e-5f);
                 const Tensor p = softmax(matmul(n, in[5]));
                 return std::vector<Tensor>{mean(mul(p, p)), sum(n)};
               },
               1e-4,
               1e-5,
               1e-4,
               1e-5});
}

// ================================ device mismatches =========================================

TEST(DeviceOps, InputsOnDifferentDevicesNameTheOpAndBothDevices) {
  SKIP_WITHOUT_DEVICE();
  const Tensor h = randn({2, 4}, 71), d = gpu(h);
  const Tensor w_h = randn({3, 4}, 72), w_d = gpu(w_h), b_h = randn({3}, 73);
  const std::string hint = "; move both to one device with .to(...)";
  EXPECT_ERROR_CONTAINS(add(d, h), "add: a is on cuda:0 but b is on cpu" + hint);
  EXPECT_ERROR_CONTAINS(sub(h, d), "sub: a is on cpu but b is on cuda:0" + hint);
  EXPECT_ERROR_CONTAINS(mul(d, h), "mul: a is on cuda:0 but b is on cpu");
  Tensor acc = d.clone();
  EXPECT_ERROR_CONTAINS(add_(acc, h), "add_: a is on cuda:0 but b is on cpu");
  EXPECT_ERROR_CONTAINS(matmul(d, w_h.transpose(0, 1)), "matmul: a is on cuda:0 but b is on cpu");
  EXPECT_ERROR_CONTAINS(linear(d, w_h), "linear: input is on cuda:0 but weight is on cpu");
  EXPECT_ERROR_CONTAINS(linear(d, w_d, b_h), "linear: input is on cuda:0 but bias is on cpu");
  EXPECT_ERROR_CONTAINS(layer_norm(d, gpu(randn({4}, 74)), randn({4}, 75), 1e-5f),
                        "layer_norm: x is on cuda:0 but bias is on cpu");
  const Tensor q = randn({1, 1, 3, 4}, 76);
  EXPECT_ERROR_CONTAINS(attention(gpu(q), gpu(q), q, true),
                        "attention: q is on cuda:0 but v is on cpu");
  EXPECT_ERROR_CONTAINS(embedding(d, Tensor::from_vector(std::vector<int32_t>{0, 1}, {2})),
                        "embedding: weight is on cuda:0 but ids is on cpu");
  EXPECT_ERROR_CONTAINS(
      cross_entropy(h, Tensor::from_vector(std::vector<int32_t>{0, 1}, {2}, gpu_device())),
      "cross_entropy: logits is on cpu but targets is on cuda:0");
  EXPECT_ERROR_CONTAINS(cat({d, d, h}, 0), "cat: input 0 is on cuda:0 but input 2 is on cpu");
  // A backward seed on the wrong device, and a gradient meeting a .grad on another device.
  Tensor leaf = gpu(h).set_requires_grad(true);
  EXPECT_ERROR_CONTAINS(sum(leaf).backward(Tensor::full({}, 1.0f)),
                        "backward: the gradient is on cpu but the root f32[] is on cuda:0");
  leaf.set_grad(h.clone());
  EXPECT_ERROR_CONTAINS(sum(leaf).backward(), "arrives on cuda:0 but its .grad is on cpu");
}

// ================================ a small GPT ===============================================

// Moves every parameter of `model` onto `device` in place (what Module::to will do).
void move_parameters(nn::Module& model, Device device) {
  for (auto& [name, p] : model.named_parameters()) {
    Tensor on_device = Tensor::empty(p.shape(), p.dtype(), device);
    Tensor(p).rebind_(on_device);
  }
}

TEST(DeviceOps, GptForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_DEVICE();
  nn::GptConfig config;
  config.vocab_size = 50;
  config.padded_vocab_multiple = 16;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 16;
  config.block_size = 8;
  nn::Gpt cpu_model(config), gpu_model(config);
  cpu_model.init_weights(7);
  gpu_model.init_weights(7);
  move_parameters(gpu_model, gpu_device());
  const std::vector<int32_t> ids = testing::ids_of(testing::random_ids({2, 8}, 50, 77));
  std::vector<int32_t> targets = testing::ids_of(testing::random_ids({2, 8}, 50, 78));
  targets[5] = -1;  // one ignored position
  const Tensor loss_h =
      cpu_model.loss(Tensor::from_vector(ids, {2, 8}), Tensor::from_vector(targets, {2, 8}));
  const Tensor loss_d = gpu_model.loss(Tensor::from_vector(ids, {2, 8}, gpu_device()),
                                       Tensor::from_vector(targets, {2, 8}, gpu_device()));
  ASSERT_EQ(loss_d.device(), gpu_device());
  // The bar for training on a device: the loss within 1e-5 relative.
  EXPECT_NEAR(loss_d.item(), loss_h.item(), 1e-5 * std::abs(loss_h.item()));
  loss_h.backward();
  loss_d.backward();
  // Every gradient through two blocks: each op's own fp32 differences (a few 1e-6 relative)
  // compounded over ~20 ops; 1e-4 of the largest gradient of each tensor.
  const auto grads_h = cpu_model.named_parameters(), grads_d = gpu_model.named_parameters();
  ASSERT_EQ(grads_h.size(), grads_d.size());
  for (size_t i = 0; i < grads_h.size(); ++i) {
    SCOPED_TRACE(grads_h[i].first);
    const Tensor gd = grads_d[i].second.grad();
    ASSERT_TRUE(gd.defined());
    ASSERT_EQ(gd.device(), gpu_device());
    const Tensor gh = grads_h[i].second.grad();
    expect_close(host(gd), gh, 1e-4, 1e-4 * max_abs(gh) + 1e-12);
  }
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_CUDA
