// Test helpers: random tensors, float64 conversions, closeness checks and the gradient checker.
#include "support/test_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "braid/autograd/engine.h"
#include "braid/autograd/grad_mode.h"
#include "braid/core/generator.h"

namespace braid::testing {
namespace {

// Streams keep the helpers' draws apart from the library's own uses of the same seeds.
constexpr uint64_t kNormalStream = 0x7e57'0001;
constexpr uint64_t kUniformStream = 0x7e57'0002;
constexpr uint64_t kIdStream = 0x7e57'0003;
constexpr uint64_t kWeightStream = 0x7e57'0004;
constexpr uint64_t kPickStream = 0x7e57'0005;

::testing::AssertionResult shapes_match(const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "shape mismatch: " << a.str() << " vs " << b.str();
}

}  // namespace

Tensor randn(const Shape& shape, uint64_t seed, float std, float mean) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = mean + std * normal_at(seed, kNormalStream, static_cast<uint64_t>(i));
  return t;
}

Tensor uniform(const Shape& shape, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = lo + (hi - lo) * uniform_at(seed, kUniformStream, static_cast<uint64_t>(i));
  return t;
}

Tensor random_ids(const Shape& shape, int64_t high, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < ids.size(); ++i) {
    const double u = uniform_at(seed, kIdStream, i);
    ids[i] = static_cast<int32_t>(std::min<int64_t>(high - 1, static_cast<int64_t>(u * high)));
  }
  return Tensor::from_vector(ids, shape);
}

std::vector<int32_t> ids_of(const Tensor& ids) {
  Tensor dense = ids.detach().contiguous();
  const int32_t* p = dense.data<int32_t>();
  return std::vector<int32_t>(p, p + dense.numel());
}

std::vector<double> to_double(const Tensor& t) {
  const std::vector<float> v = t.detach().to_vector();
  return std::vector<double>(v.begin(), v.end());
}

Tensor from_double(const std::vector<double>& values, const Shape& shape) {
  std::vector<float> f(values.begin(), values.end());
  return Tensor::from_vector(f, shape);
}

std::vector<double> permute_values(const std::vector<double>& v, const Shape& shape,
                                   const std::vector<int>& order) {
  const Shape strides = contiguous_strides(shape);
  Shape out_shape, out_strides;
  for (int d : order) {
    out_shape.push_back(shape[d]);
    out_strides.push_back(strides[d]);
  }
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t rem = i, at = 0;
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      at += (rem % out_shape[d]) * out_strides[d];
      rem /= out_shape[d];
    }
    out[i] = v[at];
  }
  return out;
}

std::string index_str(const Shape& shape, int64_t flat) {
  if (shape.empty()) return fmt::format("[{}]", flat);
  Shape idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int64_t n = std::max<int64_t>(shape[d], 1);
    idx[d] = flat % n;
    flat /= n;
  }
  return shape_str(idx);
}

Reader dense(const std::vector<double>& v, int64_t rows, int64_t cols, bool batched) {
  return [&v, rows, cols, batched](int64_t b, int64_t i, int64_t j) {
    return v[(batched ? b * rows * cols : 0) + i * cols + j];
  };
}

Reader transposed(const std::vector<double>& v, int64_t rows, int64_t cols, bool batched) {
  return [&v, rows, cols, batched](int64_t b, int64_t i, int64_t j) {
    return v[(batched ? b * rows * cols : 0) + j * rows + i];
  };
}

std::vector<double> matmul_ref(int64_t batches, int64_t m, int64_t k, int64_t n, const Reader& a,
                               const Reader& b) {
  std::vector<double> c(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += a(bi, i, p) * b(bi, p, j);
        c[(bi * m + i) * n + j] = acc;
      }
  return c;
}

::testing::AssertionResult all_close(const std::vector<double>& actual,
                                     const std::vector<double>& expected, double rtol, double atol,
                                     const Shape& shape) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size mismatch: " << actual.size() << " actual vs "
                                         << expected.size() << " expected values";
  int64_t worst = -1, failures = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const double bound = atol + rtol * std::abs(e);
    const double err = std::abs(a - e);
    // NaN on either side is a failure unless both are NaN at the same place.
    const bool nan_ok = std::isnan(a) && std::isnan(e);
    const bool inf_ok = std::isinf(a) && a == e;
    if (nan_ok || inf_ok) continue;
    if (!(err <= bound)) {
      ++failures;
      const double excess = std::isnan(err) ? INFINITY : err / std::max(bound, 1e-300);
      if (worst < 0 || excess > worst_excess) {
        worst = static_cast<int64_t>(i);
        worst_excess = excess;
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  const Shape s = shape.empty() ? Shape{static_cast<int64_t>(actual.size())} : shape;
  const double a = actual[worst], e = expected[worst];
  return ::testing::AssertionFailure()
         << failures << " of " << actual.size() << " elements differ (rtol " << rtol << ", atol "
         << atol << "); worst at " << index_str(s, worst) << ": actual " << fmt::format("{:.9g}", a)
         << " expected " << fmt::format("{:.9g}", e) << " |diff| "
         << fmt::format("{:.3g}", std::abs(a - e)) << " = " << fmt::format("{:.3g}", worst_excess)
         << " x its bound";
}

::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected,
                                     double rtol, double atol) {
  return all_close(to_double(actual), expected, rtol, atol, actual.shape());
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol) {
  if (auto r = shapes_match(actual, expected); !r) return r;
  return all_close(to_double(actual), to_double(expected), rtol, atol, actual.shape());
}

void expect_close(const Tensor& actual, const std::vector<double>& expected, double rtol,
                  double atol, std::source_location where) {
  if (auto r = all_close(actual, expected, rtol, atol); !r)
    ADD_FAILURE_AT(where.file_name(), where.line()) << r.message();
}

void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                  std::source_location where) {
  if (auto r = all_close(actual, expected, rtol, atol); !r)
    ADD_FAILURE_AT(where.file_name(), where.line()) << r.message();
}

void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                  double rtol, double atol, std::source_location where) {
  if (auto r = all_close(actual, expected, rtol, atol); !r)
    ADD_FAILURE_AT(where.file_name(), where.line()) << r.message();
}

::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) {
    if (a.defined() == b.defined()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "one tensor is undefined: " << a.str() << " vs " << b.str();
  }
  if (auto r = shapes_match(a, b); !r) return r;
  const std::vector<float> va = a.detach().to_vector(), vb = b.detach().to_vector();
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::memcmp(&va[i], &vb[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "first difference at " << index_str(a.shape(), static_cast<int64_t>(i)) << ": "
             << fmt::format("{:.9g} vs {:.9g}", va[i], vb[i]);
  }
  return ::testing::AssertionSuccess();
}

// ---- gradient checker ------------------------------------------------------------------------
//
// Why eps = 1e-2 and tol = 3e-3 for fp32 ops on O(1) inputs:
//  * Truncation: the central difference (L(x+h) - L(x-h)) / 2h errs by h^2/6 * L''' ~ 2e-5
//    relative for smooth O(1) functions (GELU, softmax, layer norm, attention all are).
//  * Rounding: each fp32 output carries a relative error of about k * 2^-24 (k: a handful of
//    roundings, ~sqrt(K) for length-K dot products). Outputs that do not depend on the perturbed
//    element are recomputed bit for bit and cancel exactly in L+ - L-, so the difference errs by
//    about 2^-24 * k * sum_{dependent j} |w_j out_j|; divided by 2h = 2e-2 this is ~3e-6 * k per
//    unit of |w out|, i.e. 1e-4..1e-3 of the gradient scale for the fan-outs used in these tests.
//    A smaller h would trade truncation for more rounding noise; 1e-2 balances the two.
//  * The perturbed input itself is rounded to fp32; dividing by the step actually stored
//    (x+ - x-) instead of 2h removes that error.
// So an element passes when |autograd - fd| <= tol * (|fd| + rms) + 1e-7, with rms the RMS of
// the autograd gradient over the whole input (the 1e-7 floor only matters where the true
// gradient and rms are both ~0). A wrong backward formula is off by O(1) relative. Measured over
// the op table the worst element reaches ~4e-4 of (|fd| + rms), so 3e-3 leaves ~8x margin while
// a 5% error in a single element still fails (tests/unit/ops/test_op_table.cpp checks that).
namespace {

double weighted_loss(const std::vector<Tensor>& outputs,
                     const std::vector<std::vector<double>>& w) {
  double loss = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (w[k].empty()) continue;
    const std::vector<double> v = to_double(outputs[k]);
    for (size_t j = 0; j < v.size(); ++j) loss += v[j] * w[k][j];
  }
  return loss;
}

std::vector<int64_t> pick_elements(int64_t n, int64_t max_elements, uint64_t seed) {
  std::vector<int64_t> picked;
  if (n <= max_elements) {
    picked.resize(static_cast<size_t>(n));
    std::iota(picked.begin(), picked.end(), 0);
    return picked;
  }
  std::set<int64_t> chosen{0, n - 1};
  for (uint64_t i = 0; static_cast<int64_t>(chosen.size()) < max_elements; ++i)
    chosen.insert(
        std::min<int64_t>(n - 1, static_cast<int64_t>(uniform_at(seed, kPickStream, i) * n)));
  return std::vector<int64_t>(chosen.begin(), chosen.end());
}

}  // namespace

::testing::AssertionResult check_gradients(const MultiFn& fn, const std::vector<Tensor>& inputs,
                                           const GradCheckOptions& options) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    if (t.dtype() != DType::f32)
      return ::testing::AssertionFailure() << "check_gradients takes f32 inputs, got " << t.str();
    leaves.push_back(t.detach().clone().set_requires_grad(true));
  }

  // Autograd side: seed each output's gradient with its weights w_k.
  std::vector<Tensor> outputs = fn(leaves);
  std::vector<std::vector<double>> weights(outputs.size());
  std::vector<Tensor> roots, root_grads;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!outputs[k].defined() || !outputs[k].requires_grad()) continue;
    Tensor w = Tensor::empty(outputs[k].shape());
    for (int64_t j = 0; j < w.numel(); ++j)
      w.data<float>()[j] = normal_at(options.seed + k, kWeightStream, static_cast<uint64_t>(j));
    weights[k] = to_double(w);
    roots.push_back(outputs[k]);
    root_grads.push_back(w);
  }
  if (roots.empty()) return ::testing::AssertionFailure() << "no output requires grad";
  autograd::backward(roots, root_grads);
  roots.clear();
  outputs.clear();

  autograd::NoGradGuard no_grad;
  std::string failures;
  int failed = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!options.check.empty() && (i >= options.check.size() || !options.check[i])) continue;
    Tensor& x = leaves[i];
    const Tensor grad = x.grad();
    if (!grad.defined())
      return ::testing::AssertionFailure()
             << "input " << i << " " << x.str() << " received no gradient";
    const std::vector<double> ad = to_double(grad);
    double rms = 0;
    for (double g : ad) rms += g * g;
    rms = ad.empty() ? 0 : std::sqrt(rms / static_cast<double>(ad.size()));

    float* p = x.data<float>();
    int64_t worst = -1;
    double worst_ratio = 0, worst_fd = 0;
    for (int64_t e : pick_elements(x.numel(), options.max_elements, options.seed + i)) {
      const float original = p[e];
      const float plus = static_cast<float>(original + options.eps);
      const float minus = static_cast<float>(original - options.eps);
      p[e] = plus;
      const double loss_plus = weighted_loss(fn(leaves), weights);
      p[e] = minus;
      const double loss_minus = weighted_loss(fn(leaves), weights);
      p[e] = original;
      const double fd = (loss_plus - loss_minus) / (static_cast<double>(plus) - minus);
      const double bound = options.tol * (std::abs(fd) + rms) + 1e-7;
      const double ratio = std::abs(ad[e] - fd) / bound;
      if (ratio > 1 && ratio > worst_ratio) {
        worst = e;
        worst_ratio = ratio;
        worst_fd = fd;
      }
    }
    if (worst >= 0) {
      ++failed;
      failures += fmt::format(
          "\n  input {} {}: worst at {}: autograd {:.7g} vs finite difference {:.7g} "
          "({:.3g} x the bound; gradient rms {:.3g})",
          i, x.str(), index_str(x.shape(), worst), ad[worst], worst_fd, worst_ratio, rms);
    }
  }
  if (failed == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "gradient check failed (eps " << options.eps << ", tol "
                                       << options.tol << "):" << failures;
}

::testing::AssertionResult check_gradients(const SingleFn& fn, const std::vector<Tensor>& inputs,
                                           const GradCheckOptions& options) {
  return check_gradients(
      MultiFn([&fn](const std::vector<Tensor>& xs) { return std::vector<Tensor>{fn(xs)}; }), inputs,
      options);
}

std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

OpCaseRegistrar::OpCaseRegistrar(std::vector<OpCase> cases) {
  for (auto& c : cases) op_cases().push_back(std::move(c));
}

}  // namespace braid::testing
