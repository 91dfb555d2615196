// Elementwise ops and reductions: add/sub/mul with broadcasting, scale, sum, mean, in-place ops.
#include <cmath>

#include "braid/autograd/grad_mode.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/views.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// Flat index into a tensor of shape `s` for output element `flat` of the broadcast shape `out`.
int64_t broadcast_source(const Shape& s, const Shape& out, int64_t flat) {
  int64_t src = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    const int64_t idx = flat % out[d];
    flat /= out[d];
    const int sd = d - static_cast<int>(out.size() - s.size());
    if (sd < 0) continue;
    if (s[sd] != 1) src += idx * stride;
    stride *= s[sd];
  }
  return src;
}

Shape broadcast_ref(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = std::max(da, db);
  }
  return out;
}

template <class F>
std::vector<double> binary_ref(const Tensor& a, const Tensor& b, F f) {
  const Shape out = broadcast_ref(a.shape(), b.shape());
  const std::vector<double> va = to_double(a), vb = to_double(b);
  std::vector<double> r(static_cast<size_t>(shape_numel(out)));
  for (size_t i = 0; i < r.size(); ++i)
    r[i] = f(va[broadcast_source(a.shape(), out, static_cast<int64_t>(i))],
             vb[broadcast_source(b.shape(), out, static_cast<int64_t>(i))]);
  return r;
}

OpCase binary_case(std::string op, std::string name, Shape sa, Shape sb, uint64_t seed) {
  OpCase c;
  c.op = op;
  c.name = std::move(name);
  c.make_inputs = [sa, sb, seed] {
    return std::vector<Tensor>{randn(sa, seed), randn(sb, seed + 1)};
  };
  c.fn = [op](const std::vector<Tensor>& x) {
    if (op == "add") return std::vector<Tensor>{add(x[0], x[1])};
    if (op == "sub") return std::vector<Tensor>{sub(x[0], x[1])};
    return std::vector<Tensor>{mul(x[0], x[1])};
  };
  c.reference = [op](const std::vector<Tensor>& x) {
    if (op == "add") return std::vector<std::vector<double>>{binary_ref(x[0], x[1], std::plus<>())};
    if (op == "sub")
      return std::vector<std::vector<double>>{binary_ref(x[0], x[1], std::minus<>())};
    return std::vector<std::vector<double>>{binary_ref(x[0], x[1], std::multiplies<>())};
  };
  // One fp32 rounding per element: 2^-24 relative, well inside 1e-6.
  c.rtol = 1e-6;
  c.atol = 1e-7;
  return c;
}

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> cases;
  cases.push_back(binary_case("add", "add_same_shape", {3, 4}, {3, 4}, 10));
  cases.push_back(binary_case("add", "add_bias_onto_BTC", {2, 3, 5}, {5}, 11));
  cases.push_back(binary_case("add", "add_size1_dims", {2, 1, 4}, {3, 1}, 12));
  cases.push_back(binary_case("add", "add_scalar_tensor", {2, 3}, {}, 13));
  cases.push_back(binary_case("sub", "sub_bias_onto_BTC", {2, 3, 5}, {5}, 14));
  cases.push_back(binary_case("sub", "sub_size1_both_sides", {4, 1}, {1, 3}, 15));
  cases.push_back(binary_case("mul", "mul_same_shape", {3, 4}, {3, 4}, 16));
  cases.push_back(binary_case("mul", "mul_bias_onto_BTC", {2, 3, 5}, {5}, 17));
  cases.push_back(binary_case("mul", "mul_size1_dims", {2, 1, 4}, {1, 3, 1}, 18));

  // Strided operands: a transposed view added to a dense tensor, and a view times itself
  // (the same input on both sides accumulates two gradient contributions).
  OpCase strided;
  strided.op = "add";
  strided.name = "add_transposed_view";
  strided.make_inputs = [] { return std::vector<Tensor>{randn({4, 3}, 20), randn({3, 4}, 21)}; };
  strided.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{add(transpose(x[0], 0, 1), x[1])};
  };
  strided.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> a = to_double(x[0]), b = to_double(x[1]);
    std::vector<double> r(12);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) r[i * 4 + j] = a[j * 3 + i] + b[i * 4 + j];
    return std::vector<std::vector<double>>{r};
  };
  cases.push_back(strided);

  OpCase square;
  square.op = "mul";
  square.name = "mul_input_with_itself";
  square.make_inputs = [] { return std::vector<Tensor>{randn({2, 5}, 22)}; };
  square.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{mul(x[0], x[0])}; };
  square.reference = [](const std::vector<Tensor>& x) {
    std::vector<double> v = to_double(x[0]);
    for (double& e : v) e *= e;
    return std::vector<std::vector<double>>{v};
  };
  cases.push_back(square);

  OpCase sc;
  sc.op = "scale";
  sc.name = "scale_negative_alpha";
  sc.make_inputs = [] { return std::vector<Tensor>{randn({3, 4}, 23)}; };
  sc.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{scale(x[0], -1.5f)}; };
  sc.reference = [](const std::vector<Tensor>& x) {
    std::vector<double> v = to_double(x[0]);
    for (double& e : v) e *= -1.5;
    return std::vector<std::vector<double>>{v};
  };
  cases.push_back(sc);

  OpCase sc_view = sc;
  sc_view.name = "scale_of_strided_view";
  sc_view.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{scale(transpose(x[0], 0, 1), 2.0f)};
  };
  sc_view.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> v = to_double(x[0]);
    std::vector<double> r(12);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) r[i * 3 + j] = 2.0 * v[j * 4 + i];
    return std::vector<std::vector<double>>{r};
  };
  cases.push_back(sc_view);

  // Sums accumulate in double inside the kernel; the only error is the final rounding to fp32.
  OpCase s;
  s.op = "sum";
  s.name = "sum_3d";
  s.make_inputs = [] { return std::vector<Tensor>{randn({2, 3, 4}, 24)}; };
  s.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{sum(x[0])}; };
  s.reference = [](const std::vector<Tensor>& x) {
    double t = 0;
    for (double v : to_double(x[0])) t += v;
    return std::vector<std::vector<double>>{{t}};
  };
  s.rtol = 1e-6;
  s.atol = 1e-6;
  cases.push_back(s);

  OpCase s_view = s;
  s_view.name = "sum_of_narrowed_view";
  s_view.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum(narrow(x[0], 2, 1, 2))};
  };
  s_view.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> v = to_double(x[0]);
    double t = 0;
    for (int i = 0; i < 6; ++i) t += v[i * 4 + 1] + v[i * 4 + 2];
    return std::vector<std::vector<double>>{{t}};
  };
  cases.push_back(s_view);

  OpCase m = s;
  m.op = "mean";
  m.name = "mean_3d";
  m.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{mean(x[0])}; };
  m.reference = [](const std::vector<Tensor>& x) {
    double t = 0;
    const std::vector<double> v = to_double(x[0]);
    for (double e : v) t += e;
    return std::vector<std::vector<double>>{{t / static_cast<double>(v.size())}};
  };
  cases.push_back(m);
  return cases;
}

const OpCaseRegistrar kRegister(elementwise_cases());

TEST(BroadcastShapes, NumpyRules) {
  EXPECT_EQ(broadcast_shapes({2, 3, 5}, {5}), (Shape{2, 3, 5}));
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({1}, {1}), (Shape{1}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 3}), (Shape{0, 3}));
}

TEST(BroadcastShapes, MismatchNamesBothShapes) {
  EXPECT_ERROR_CONTAINS(broadcast_shapes({2, 3}, {4}), "[2, 3]");
  EXPECT_ERROR_CONTAINS(broadcast_shapes({2, 3}, {4}), "[4]");
  EXPECT_ERROR_CONTAINS(add(randn({2, 3}, 1), randn({2, 4}, 2)), "[2, 4]");
  EXPECT_ERROR_CONTAINS(mul(randn({5}, 1), randn({3, 4}, 2)), "do not broadcast");
  EXPECT_ERROR_CONTAINS(sub(randn({3, 2}, 1), randn({2, 3}, 2)), "[3, 2]");
}

TEST(Elementwise, RejectsNonFloat) {
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  EXPECT_ERROR_CONTAINS(add(ids, randn({2}, 1)), "i32[2]");
}

TEST(Elementwise, NoHistoryWithoutGradOrUnderNoGrad) {
  Tensor a = randn({3}, 1), b = randn({3}, 2);
  EXPECT_FALSE(add(a, b).requires_grad());
  a.set_requires_grad(true);
  EXPECT_TRUE(add(a, b).requires_grad());
  autograd::NoGradGuard no_grad;
  Tensor c = add(a, b);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_FALSE(c.grad_fn());
}

TEST(Elementwise, BiasGradientSumsOverBatchAndTime) {
  // The [C] bias of a [B, T, C] activation receives sum over (b, t) of the upstream gradient.
  Tensor x = randn({2, 3, 4}, 5).set_requires_grad(true);
  Tensor bias = randn({4}, 6).set_requires_grad(true);
  Tensor g = randn({2, 3, 4}, 7);
  add(x, bias).backward(g);
  const std::vector<double> gv = to_double(g);
  std::vector<double> expect(4, 0.0);
  for (int i = 0; i < 24; ++i) expect[i % 4] += gv[i];
  // Summed in double and rounded once.
  expect_close(bias.grad(), expect, 1e-6, 1e-7);
  expect_close(x.grad(), gv, 0, 0);
}

TEST(SumToShape, ReducesBroadcastDims) {
  Tensor x = randn({2, 3, 4}, 30);
  const std::vector<double> v = to_double(x);
  for (const Shape& target : {Shape{4}, Shape{3, 1}, Shape{1, 3, 4}, Shape{2, 1, 4}, Shape{2, 1, 1},
                              Shape{}, Shape{1}, Shape{2, 3, 4}}) {
    SCOPED_TRACE(shape_str(target));
    Tensor out = sum_to_shape(x, target);
    ASSERT_EQ(out.shape(), target);
    std::vector<double> expect(static_cast<size_t>(shape_numel(target)), 0.0);
    for (int64_t i = 0; i < 24; ++i) expect[broadcast_source(target, x.shape(), i)] += v[i];
    // At most 24 fp32 additions of O(1) values: 24 * 2^-24 * 5 < 1e-5.
    expect_close(out, expect, 1e-5, 1e-5);
  }
  EXPECT_ERROR_CONTAINS(sum_to_shape(x, {5}), "[5]");
}

TEST(SumToShape, StridedInput) {
  Tensor base = randn({4, 3}, 31);
  Tensor x = transpose(base, 0, 1);  // [3, 4] with strides (1, 3)
  Tensor out = sum_to_shape(x, {4});
  const std::vector<double> v = to_double(base);
  std::vector<double> expect(4, 0.0);
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) expect[j] += v[j * 3 + i];
  expect_close(out, expect, 1e-6, 1e-6);
}

TEST(InPlace, AddBroadcastsIntoTargetWithoutHistory) {
  Tensor a = randn({2, 3}, 40).set_requires_grad(true);
  Tensor b = randn({3}, 41);
  const std::vector<double> va = to_double(a), vb = to_double(b);
  add_(a, b);
  std::vector<double> expect(6);
  for (int i = 0; i < 6; ++i) expect[i] = static_cast<float>(va[i]) + static_cast<float>(vb[i % 3]);
  expect_close(a, expect, 0, 0);
  EXPECT_TRUE(a.is_leaf());
  EXPECT_ERROR_CONTAINS(add_(b, a), "does not broadcast into");
}

TEST(InPlace, AddIntoStridedView) {
  Tensor base = Tensor::zeros({3, 4});
  Tensor view = narrow(base, 1, 1, 2);  // shares storage, strided
  add_(view, Tensor::full({3, 2}, 2.0f));
  const std::vector<double> v = to_double(base);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(v[i * 4 + j], (j == 1 || j == 2) ? 2.0 : 0.0);
}

TEST(InPlace, ScaleDenseOnly) {
  Tensor x = Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 3.0f}, {3});
  scale_(x, 0.5f);
  expect_close(x, {0.5, -1.0, 1.5}, 0, 0);
  Tensor t = randn({2, 3}, 3).transpose(0, 1);
  EXPECT_ERROR_CONTAINS(scale_(t, 2.0f), "dense");
}

// The sum kernel adds fp32 partial sums over blocks of at most 256 elements, then adds the
// blocks in double. Recursive summation of m terms errs by at most (m - 1) * 2^-24 relative, so
// the whole sum stays within 255 * 2^-24 ~ 1.5e-5 relative for any length, where one fp32
// accumulator over 4M elements of 0.1 would be off by more than 10% (its ulp passes 0.1).
TEST(Reduce, LongSumsStayAccurate) {
  const int64_t n = int64_t{1} << 22;
  Tensor x = Tensor::full({n}, 0.1f);
  const double v = static_cast<double>(0.1f);
  const double bound = 255.0 * std::ldexp(1.0, -24);
  EXPECT_NEAR(sum(x).item(), n * v, bound * n * v);
  EXPECT_NEAR(sum_of_squares(x), n * v * v, bound * n * v * v);
  EXPECT_NEAR(mean(x).item(), v, bound * v);
  // Layout does not matter: a transposed view sums like its dense copy.
  Tensor t = transpose(randn({2, 3}, 1), 0, 1);
  EXPECT_EQ(sum_of_squares(t), sum_of_squares(contiguous(t)));
}

TEST(Reduce, MeanOfEmptyThrows) {
  EXPECT_ERROR_CONTAINS(mean(Tensor::zeros({0, 3})), "[0, 3]");
}

TEST(Reduce, SumAndMeanAreScalars) {
  Tensor x = randn({2, 3}, 50);
  EXPECT_EQ(sum(x).dim(), 0);
  EXPECT_EQ(mean(x).dim(), 0);
  EXPECT_EQ(sum(Tensor::zeros({0})).item(), 0.0f);
}

}  // namespace
}  // namespace braid::testing
