// gelu (tanh form), softmax over the last dim and layer_norm: float64 references and edge cases.
#include <cmath>

#include "braid/ops/activation.h"
#include "braid/ops/norm.h"
#include "braid/ops/views.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// Softmax over contiguous rows of length c, in double with the max subtracted.
std::vector<double> softmax_ref(const std::vector<double>& x, int64_t c) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / c; ++r) {
    double mx = -INFINITY, total = 0;
    for (int64_t i = 0; i < c; ++i) mx = std::max(mx, x[r * c + i]);
    for (int64_t i = 0; i < c; ++i) total += std::exp(x[r * c + i] - mx);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = std::exp(x[r * c + i] - mx) / total;
  }
  return y;
}

std::vector<double> layer_norm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, int64_t c, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / c; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < c; ++i) mean += x[r * c + i];
    mean /= static_cast<double>(c);
    for (int64_t i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
    var /= static_cast<double>(c);  // biased variance, as PyTorch's LayerNorm
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = (x[r * c + i] - mean) * rstd * w[i] + b[i];
  }
  return y;
}

// Transpose of the last two dims of a dense [n, a, b] buffer, as a dense [n, b, a] vector.
std::vector<double> transpose_last2(const std::vector<double>& v, int64_t n, int64_t a, int64_t b) {
  std::vector<double> out(v.size());
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) out[(k * b + j) * a + i] = v[(k * a + i) * b + j];
  return out;
}

std::vector<OpCase> activation_norm_cases() {
  std::vector<OpCase> cases;
  // tanh and exp in fp32 are accurate to a few ulp: 1e-5 relative/1e-6 absolute has margin.
  OpCase g;
  g.op = "gelu";
  g.name = "gelu_3d";
  g.make_inputs = [] { return std::vector<Tensor>{randn({2, 3, 7}, 200, 2.0f)}; };
  g.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{gelu(x[0])}; };
  g.reference = [](const std::vector<Tensor>& x) {
    std::vector<double> v = to_double(x[0]);
    for (double& e : v) e = gelu_ref(e);
    return std::vector<std::vector<double>>{v};
  };
  g.atol = 1e-6;
  cases.push_back(g);

  OpCase g_view = g;
  g_view.name = "gelu_transposed_view";
  g_view.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{gelu(transpose(x[0], 1, 2))};
  };
  g_view.reference = [](const std::vector<Tensor>& x) {
    std::vector<double> v = transpose_last2(to_double(x[0]), 2, 3, 7);
    for (double& e : v) e = gelu_ref(e);
    return std::vector<std::vector<double>>{v};
  };
  cases.push_back(g_view);

  OpCase s;
  s.op = "softmax";
  s.name = "softmax_rows";
  s.make_inputs = [] { return std::vector<Tensor>{randn({2, 3, 6}, 210, 2.0f)}; };
  s.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{softmax(x[0])}; };
  s.reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{softmax_ref(to_double(x[0]), 6)};
  };
  s.atol = 1e-7;  // probabilities are <= 1; absolute errors are ~1e-8
  cases.push_back(s);

  OpCase s_view = s;
  s_view.name = "softmax_transposed_view";
  s_view.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{softmax(transpose(x[0], 1, 2))};
  };
  s_view.reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{
        softmax_ref(transpose_last2(to_double(x[0]), 2, 3, 6), 3)};
  };
  cases.push_back(s_view);

  // Layer norm: mean and variance of C = 8 fp32 values, then a few roundings: 1e-5 has margin.
  OpCase ln;
  ln.op = "layer_norm";
  ln.name = "layer_norm_3d";
  ln.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 3, 8}, 220, 1.5f, 0.3f), randn({8}, 221, 0.5f, 1.0f),
                               randn({8}, 222)};
  };
  ln.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{layer_norm(x[0], x[1], x[2])};
  };
  ln.reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{
        layer_norm_ref(to_double(x[0]), to_double(x[1]), to_double(x[2]), 8, 1e-5)};
  };
  cases.push_back(ln);

  OpCase ln_view = ln;
  ln_view.name = "layer_norm_strided_input_large_eps";
  ln_view.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 8, 3}, 223), randn({8}, 224, 0.5f, 1.0f), randn({8}, 225)};
  };
  ln_view.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{layer_norm(transpose(x[0], 1, 2), x[1], x[2], 0.1f)};
  };
  ln_view.reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{layer_norm_ref(
        transpose_last2(to_double(x[0]), 2, 8, 3), to_double(x[1]), to_double(x[2]), 8, 0.1f)};
  };
  cases.push_back(ln_view);

  // Rows of 45: the AVX-512 kernel sums 32 values in lanes and 13 after them, the baseline
  // 40 and 5, so both a lane body and a tail are checked (forward and finite differences).
  OpCase ln_wide = ln;
  ln_wide.name = "layer_norm_rows_with_lane_tail";
  ln_wide.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 3, 45}, 226, 1.5f, 0.3f), randn({45}, 227, 0.5f, 1.0f),
                               randn({45}, 228)};
  };
  ln_wide.reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{
        layer_norm_ref(to_double(x[0]), to_double(x[1]), to_double(x[2]), 45, 1e-5)};
  };
  cases.push_back(ln_wide);

  // Outputs consumed transposed: the incoming gradients are strided views.
  for (OpCase base : {g, s, ln}) {
    OpCase t = base;
    t.name = base.name + "_output_transposed";
    t.fn = [fn = base.fn](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{transpose(fn(x)[0], 0, 2)};
    };
    const Shape shape = base.make_inputs()[0].shape();
    t.reference = [ref = base.reference, shape](const std::vector<Tensor>& x) {
      return std::vector<std::vector<double>>{permute_values(ref(x)[0], shape, {2, 1, 0})};
    };
    cases.push_back(t);
  }
  return cases;
}

const OpCaseRegistrar kRegister(activation_norm_cases());

TEST(Gelu, KnownValues) {
  Tensor x = Tensor::from_vector(std::vector<float>{0.0f, 1.0f, -1.0f, 3.0f, -6.0f, 10.0f}, {6});
  std::vector<double> expect;
  for (double v : to_double(x)) expect.push_back(gelu_ref(v));
  expect_close(gelu(x), expect, 1e-6, 1e-7);
  EXPECT_EQ(gelu(x).to_vector()[0], 0.0f);
  EXPECT_ERROR_CONTAINS(gelu(Tensor::zeros({2}, DType::i32)), "i32[2]");
}

TEST(Softmax, StableForLargeLogits) {
  // exp(200) overflows fp32; the kernel must subtract the row max first.
  Tensor x = randn({3, 5}, 230, 3.0f, 200.0f);
  Tensor y = softmax(x);
  expect_close(y, softmax_ref(to_double(x), 5), 1e-5, 1e-7);
  Tensor neg = randn({3, 5}, 231, 3.0f, -200.0f);
  expect_close(softmax(neg), softmax_ref(to_double(neg), 5), 1e-5, 1e-7);
}

TEST(Softmax, RowsSumToOne) {
  Tensor y = softmax(randn({4, 33}, 232, 4.0f));
  const std::vector<double> v = to_double(y);
  for (int r = 0; r < 4; ++r) {
    double total = 0;
    for (int i = 0; i < 33; ++i) total += v[r * 33 + i];
    EXPECT_NEAR(total, 1.0, 33 * 6e-8);  // 33 probabilities each rounded to fp32
  }
}

TEST(LayerNorm, LargeMeanKeepsPrecision) {
  // A row with mean 1000 and spread 1: fp32 holds x to ~6e-5, so normalised values carry about
  // 6e-5 absolute error; the two-pass variance must not lose more than that.
  Tensor x = randn({4, 16}, 240, 1.0f, 1000.0f);
  Tensor w = Tensor::full({16}, 1.0f), b = Tensor::zeros({16});
  expect_close(layer_norm(x, w, b),
               layer_norm_ref(to_double(x), to_double(w), to_double(b), 16, 1e-5), 0, 2e-4);
}

TEST(LayerNorm, ShapeErrors) {
  EXPECT_ERROR_CONTAINS(layer_norm(randn({2, 8}, 1), randn({7}, 2), randn({8}, 3)), "f32[7]");
  EXPECT_ERROR_CONTAINS(layer_norm(randn({2, 8}, 1), randn({8}, 2), randn({8}, 3), 0.0f),
                        "eps must be > 0");
}

TEST(LayerNorm, WeightAndBiasGradientsClosedForm) {
  // dbias = sum of g over rows; dweight = sum of g * xhat: a direct check beside the FD one.
  Tensor x = randn({5, 6}, 250);
  Tensor w = randn({6}, 251).set_requires_grad(true);
  Tensor b = randn({6}, 252).set_requires_grad(true);
  Tensor g = randn({5, 6}, 253);
  layer_norm(x, w, b).backward(g);
  const std::vector<double> xv = to_double(x), gv = to_double(g);
  const std::vector<double> ones(6, 1.0), zeros(6, 0.0);
  const std::vector<double> xhat = layer_norm_ref(xv, ones, zeros, 6, 1e-5);
  std::vector<double> dw(6, 0.0), db(6, 0.0);
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 6; ++i) {
      dw[i] += gv[r * 6 + i] * xhat[r * 6 + i];
      db[i] += gv[r * 6 + i];
    }
  expect_close(w.grad(), dw, 1e-5, 1e-5);
  expect_close(b.grad(), db, 1e-5, 1e-5);
  EXPECT_FALSE(x.grad().defined());
}

}  // namespace
}  // namespace braid::testing
