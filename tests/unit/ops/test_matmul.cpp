// matmul and linear: 2-D, batched, shared right operand, transposed views without copies, bias.
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/core/allocator.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/matmul.h"
#include "braid/ops/views.h"
#include "ops/cpu/onednn_matmul.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// Forward tolerance: each output is a length-K fp32 dot product of O(1) values, error about
// sqrt(K) * 2^-24 * sum |a b| ~ 1e-6 for K <= 16; 1e-5 relative + 1e-5 absolute has margin.
OpCase matmul_case(std::string name, Shape sa, Shape sb, bool ta, bool tb, bool shared_b,
                   uint64_t seed) {
  OpCase c;
  c.op = "matmul";
  c.name = std::move(name);
  c.make_inputs = [sa, sb, seed] {
    return std::vector<Tensor>{randn(sa, seed), randn(sb, seed + 1)};
  };
  c.fn = [ta, tb](const std::vector<Tensor>& x) {
    Tensor a = ta ? transpose(x[0], -1, -2) : x[0];
    Tensor b = tb ? transpose(x[1], -1, -2) : x[1];
    return std::vector<Tensor>{matmul(a, b)};
  };
  c.reference = [sa, sb, ta, tb, shared_b](const std::vector<Tensor>& x) {
    const std::vector<double> va = to_double(x[0]), vb = to_double(x[1]);
    const int64_t r = static_cast<int64_t>(sa.size());
    const int64_t m = ta ? sa[r - 1] : sa[r - 2], k = ta ? sa[r - 2] : sa[r - 1];
    const int64_t rb = static_cast<int64_t>(sb.size());
    const int64_t n = tb ? sb[rb - 2] : sb[rb - 1];
    const int64_t batches = shape_numel(sa) / (m * k);
    Reader a = ta ? transposed(va, m, k) : dense(va, m, k);
    Reader b = tb ? transposed(vb, k, n, !shared_b) : dense(vb, k, n, !shared_b);
    return std::vector<std::vector<double>>{matmul_ref(batches, m, k, n, a, b)};
  };
  return c;
}

std::vector<double> linear_ref(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>* bias, int64_t rows, int64_t in,
                               int64_t out) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

std::vector<OpCase> matmul_cases() {
  std::vector<OpCase> cases;
  cases.push_back(matmul_case("matmul_2d", {3, 4}, {4, 5}, false, false, false, 100));
  cases.push_back(matmul_case("matmul_batched", {2, 3, 4}, {2, 4, 5}, false, false, false, 102));
  cases.push_back(
      matmul_case("matmul_batched_4d", {2, 2, 3, 4}, {2, 2, 4, 5}, false, false, false, 104));
  cases.push_back(matmul_case("matmul_shared_rhs", {2, 3, 4}, {4, 5}, false, false, true, 106));
  cases.push_back(matmul_case("matmul_transposed_rhs", {3, 4}, {5, 4}, false, true, false, 108));
  cases.push_back(matmul_case("matmul_transposed_lhs", {4, 3}, {4, 5}, true, false, false, 110));
  cases.push_back(matmul_case("matmul_both_transposed", {4, 3}, {5, 4}, true, true, false, 112));
  cases.push_back(
      matmul_case("matmul_batched_transposed_rhs", {2, 3, 4}, {2, 5, 4}, false, true, false, 114));
  cases.push_back(
      matmul_case("matmul_shared_transposed_rhs", {2, 3, 4}, {5, 4}, false, true, true, 116));
  cases.push_back(matmul_case("matmul_row_times_column", {1, 4}, {4, 1}, false, false, false, 118));
  cases.push_back(matmul_case("matmul_inner_one", {3, 1}, {1, 4}, false, false, false, 120));

  // Attention-style operands: q [B, T, H, D] permuted to [B, H, T, D] against k^T, both strided
  // in their batch dims as well as transposed.
  OpCase heads;
  heads.op = "matmul";
  heads.name = "matmul_permuted_heads";
  heads.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 3, 2, 4}, 122), randn({2, 5, 2, 4}, 123)};
  };
  heads.fn = [](const std::vector<Tensor>& x) {
    Tensor q = permute(x[0], {0, 2, 1, 3});     // [B, H, T, D]
    Tensor kt = permute(x[1], {0, 2, 3, 1});    // [B, H, D, S]
    return std::vector<Tensor>{matmul(q, kt)};  // [B, H, T, S]
  };
  heads.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> q = to_double(x[0]), k = to_double(x[1]);
    std::vector<double> out(2 * 2 * 3 * 5);
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 2; ++h)
        for (int t = 0; t < 3; ++t)
          for (int s = 0; s < 5; ++s) {
            double acc = 0;
            for (int d = 0; d < 4; ++d)
              acc += q[((b * 3 + t) * 2 + h) * 4 + d] * k[((b * 5 + s) * 2 + h) * 4 + d];
            out[((b * 2 + h) * 3 + t) * 5 + s] = acc;
          }
    return std::vector<std::vector<double>>{out};
  };
  cases.push_back(heads);

  OpCase lin;
  lin.op = "linear";
  lin.name = "linear_bias_3d";
  lin.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 3, 4}, 130), randn({5, 4}, 131), randn({5}, 132)};
  };
  lin.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{linear(x[0], x[1], x[2])};
  };
  lin.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> b = to_double(x[2]);
    return std::vector<std::vector<double>>{
        linear_ref(to_double(x[0]), to_double(x[1]), &b, 6, 4, 5)};
  };
  cases.push_back(lin);

  OpCase lin_nb = lin;
  lin_nb.name = "linear_no_bias_3d";
  lin_nb.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 3, 4}, 133), randn({5, 4}, 134)};
  };
  lin_nb.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{linear(x[0], x[1])}; };
  lin_nb.reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{
        linear_ref(to_double(x[0]), to_double(x[1]), nullptr, 6, 4, 5)};
  };
  cases.push_back(lin_nb);

  // A strided input (the transpose of a [4, 3] buffer) that linear must reshape by copying.
  OpCase lin_view = lin;
  lin_view.name = "linear_transposed_input";
  lin_view.make_inputs = [] {
    return std::vector<Tensor>{randn({4, 3}, 135), randn({5, 4}, 136), randn({5}, 137)};
  };
  lin_view.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{linear(transpose(x[0], 0, 1), x[1], x[2])};
  };
  lin_view.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> xv = to_double(x[0]), b = to_double(x[2]);
    std::vector<double> xt(12);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) xt[i * 4 + j] = xv[j * 3 + i];
    return std::vector<std::vector<double>>{linear_ref(xt, to_double(x[1]), &b, 3, 4, 5)};
  };
  cases.push_back(lin_view);

  // Outputs consumed through a permute: the gradient reaching the op is a strided view.
  OpCase mm_perm =
      matmul_case("matmul_shared_rhs_output_permuted", {2, 3, 4}, {4, 5}, false, false, true, 124);
  const auto mm_ref = mm_perm.reference;
  mm_perm.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{permute(matmul(x[0], x[1]), {2, 0, 1})};
  };
  mm_perm.reference = [mm_ref](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{permute_values(mm_ref(x)[0], {2, 3, 5}, {2, 0, 1})};
  };
  cases.push_back(mm_perm);

  OpCase lin_perm = lin;
  lin_perm.name = "linear_output_transposed";
  lin_perm.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{transpose(linear(x[0], x[1], x[2]), 0, 2)};
  };
  lin_perm.reference = [ref = lin.reference](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{permute_values(ref(x)[0], {2, 3, 5}, {2, 1, 0})};
  };
  cases.push_back(lin_perm);
  return cases;
}

const OpCaseRegistrar kRegister(matmul_cases());

// The forward of a transposed operand allocates only its output: GEMM reads the view as is.
TEST(Matmul, TransposedViewsAreNotCopied) {
  autograd::NoGradGuard no_grad;
  Tensor a = randn({8, 16}, 1), b = randn({12, 16}, 2), c = randn({16, 8}, 3);
  const int64_t before = host_memory_stats().allocations;
  Tensor out = matmul(a, transpose(b, 0, 1));
  EXPECT_EQ(host_memory_stats().allocations - before, 1);
  Tensor out2 = matmul(transpose(c, 0, 1), transpose(b, 0, 1));
  EXPECT_EQ(host_memory_stats().allocations - before, 2);
  Tensor batched = randn({2, 8, 16}, 4), kt = randn({2, 12, 16}, 5);
  const int64_t before3 = host_memory_stats().allocations;
  Tensor out3 = matmul(batched, transpose(kt, 1, 2));
  EXPECT_EQ(host_memory_stats().allocations - before3, 1);
  expect_close(out2, matmul(contiguous(transpose(c, 0, 1)), contiguous(transpose(b, 0, 1))), 0, 0);
}

// A view with no unit stride in either matrix dim (every other column) must still be right.
TEST(Matmul, NonUnitStrideOperandIsHandled) {
  Tensor base = randn({3, 8}, 7), b = randn({4, 5}, 8);
  Tensor a = base.alias({3, 4}, {8, 2}, 0);  // columns 0, 2, 4, 6
  const std::vector<double> bv = to_double(base);
  std::vector<double> av(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) av[i * 4 + j] = bv[i * 8 + 2 * j];
  const std::vector<double> bb = to_double(b);
  expect_close(matmul(a, b), matmul_ref(1, 3, 4, 5, dense(av, 3, 4), dense(bb, 4, 5)), 1e-5, 1e-5);
}

TEST(Matmul, LargerThanBlasBlocking) {
  // Big enough for the BLAS library to block and thread; values O(1), K = 96: error ~ 1e-5.
  Tensor a = randn({2, 40, 96}, 9), b = randn({96, 33}, 10);
  const std::vector<double> av = to_double(a), bv = to_double(b);
  expect_close(matmul(a, b), matmul_ref(2, 40, 96, 33, dense(av, 40, 96), dense(bv, 96, 33, false)),
               1e-5, 5e-5);
}

// The GEMM kernel's alpha and beta, called directly as the weight-gradient path calls it.
void gemm_kernel(const Tensor& a, bool ta, const Tensor& b, bool tb, float alpha, float beta,
                 Tensor& c) {
  ops::kernel<ops::GemmKernel>(Device::cpu())(a, ta, b, tb, alpha, beta, c);
}

// beta = 0 must not read C (a NaN left there by a previous use would survive 0 * NaN), and
// beta = 1 adds to it: .grad accumulation relies on both.
TEST(GemmKernel, BetaZeroOverwritesAndBetaOneAccumulates) {
  Tensor a = randn({37, 53}, 11), b = randn({53, 29}, 12);
  const std::vector<double> ref =
      matmul_ref(1, 37, 53, 29, dense(to_double(a), 37, 53), dense(to_double(b), 53, 29));
  Tensor c = Tensor::full({37, 29}, std::numeric_limits<float>::quiet_NaN());
  gemm_kernel(a, false, b, false, 1.0f, 0.0f, c);
  expect_close(c, ref, 1e-5, 1e-5);
  Tensor start = randn({37, 29}, 13);
  Tensor acc = start.clone();
  gemm_kernel(a, false, b, false, 0.5f, 1.0f, acc);
  std::vector<double> expected = to_double(start);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += 0.5 * ref[i];
  expect_close(acc, expected, 1e-5, 1e-5);
}

// A reduction over zero elements leaves beta * C, for either beta.
TEST(GemmKernel, EmptyReductionScalesTheOutput) {
  Tensor a = Tensor::empty({6, 0}), b = Tensor::empty({0, 5});
  Tensor c = randn({6, 5}, 14);
  const std::vector<double> before = to_double(c);
  gemm_kernel(a, false, b, false, 1.0f, 1.0f, c);
  expect_close(c, before, 0, 0);
  gemm_kernel(a, false, b, false, 1.0f, 0.0f, c);
  expect_close(c, std::vector<double>(before.size(), 0.0), 0, 0);
}

// Operands and output that are column slices of wider matrices (leading dimension > width),
// in every transpose combination, at a size where the library blocks the reduction.
TEST(GemmKernel, SlicesOfWiderMatricesInEveryOrientation) {
  const int64_t m = 45, k = 300, n = 70;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(std::string("trans_a ") + (ta ? "yes" : "no") + ", trans_b " +
                   (tb ? "yes" : "no"));
      Tensor wide_a = randn(ta ? Shape{k, m + 7} : Shape{m, k + 7}, 15);
      Tensor wide_b = randn(tb ? Shape{n, k + 3} : Shape{k, n + 3}, 16);
      Tensor a = narrow(wide_a, 1, 2, ta ? m : k), b = narrow(wide_b, 1, 1, tb ? k : n);
      Tensor wide_c = Tensor::zeros({m, n + 9});
      Tensor c = narrow(wide_c, 1, 4, n);
      gemm_kernel(a, ta, b, tb, 1.0f, 0.0f, c);
      const std::vector<double> va = to_double(contiguous(a)), vb = to_double(contiguous(b));
      const Reader ra = ta ? transposed(va, m, k, false) : dense(va, m, k, false);
      const Reader rb = tb ? transposed(vb, k, n, false) : dense(vb, k, n, false);
      // K = 300 sums of O(1) products: fp32 error ~ sqrt(K) * 6e-8 * 17 ~ 2e-5 absolute.
      expect_close(contiguous(c), matmul_ref(1, m, k, n, ra, rb), 1e-5, 1e-4);
      const std::vector<double> around = to_double(wide_c);
      double outside = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n + 9; ++j)
          if (j < 4 || j >= 4 + n) outside = std::max(outside, std::abs(around[i * (n + 9) + j]));
      EXPECT_EQ(outside, 0.0) << "GEMM wrote outside its output slice";
    }
}

// X W^T with few rows and a long reduction goes through oneDNN's matmul primitive (in the
// oneDNN build): the shape rule, then that path with column slices, beta 0 over NaN and beta 1.
TEST(GemmKernel, ForwardProductShapesTakeTheMatmulPrimitive) {
  using ops::cpu::matmul_primitive_suits;
  EXPECT_TRUE(matmul_primitive_suits(false, true, 256, 768, 1.0f, 0.0f));
  EXPECT_TRUE(matmul_primitive_suits(false, true, 512, 512, 1.0f, 1.0f));
  EXPECT_FALSE(matmul_primitive_suits(false, true, 513, 768, 1.0f, 0.0f));   // many rows
  EXPECT_FALSE(matmul_primitive_suits(false, true, 256, 511, 1.0f, 0.0f));   // short reduction
  EXPECT_FALSE(matmul_primitive_suits(false, false, 256, 768, 1.0f, 0.0f));  // input gradient
  EXPECT_FALSE(matmul_primitive_suits(true, false, 256, 768, 1.0f, 0.0f));   // weight gradient
  EXPECT_FALSE(matmul_primitive_suits(false, true, 256, 768, 0.5f, 0.0f));   // alpha
  EXPECT_FALSE(matmul_primitive_suits(false, true, 256, 768, 1.0f, 0.5f));   // other beta
}

TEST(GemmKernel, MatmulPrimitivePathOnSlicesWithBothBetas) {
  const int64_t k = 600, n = 70;
  for (const int64_t m : {int64_t{45}, int64_t{1}}) {  // one row: leading dimensions normalised
    SCOPED_TRACE(::testing::Message() << "rows " << m);
    ASSERT_TRUE(ops::cpu::matmul_primitive_suits(false, true, m, k, 1.0f, 0.0f));
    Tensor wide_x = randn({m, k + 7}, 17), wide_w = randn({n, k + 3}, 18);
    Tensor x = narrow(wide_x, 1, 2, k), w = narrow(wide_w, 1, 1, k);
    const std::vector<double> xv = to_double(contiguous(x)), wv = to_double(contiguous(w));
    const std::vector<double> ref =
        matmul_ref(1, m, k, n, dense(xv, m, k, false), transposed(wv, k, n, false));
    Tensor wide_c = Tensor::full({m, n + 9}, std::numeric_limits<float>::quiet_NaN());
    Tensor c = narrow(wide_c, 1, 4, n);
    gemm_kernel(x, false, w, true, 1.0f, 0.0f, c);
    // K = 600 sums of O(1) products: fp32 error ~ sqrt(K) * 6e-8 * 25 ~ 4e-5 absolute.
    expect_close(contiguous(c), ref, 1e-5, 2e-4);
    const std::vector<double> around = to_double(wide_c);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n + 9; ++j)
        if (j < 4 || j >= 4 + n) ASSERT_TRUE(std::isnan(around[i * (n + 9) + j])) << i << ", " << j;
    Tensor start = randn({m, n}, 19);
    Tensor acc = start.clone();
    gemm_kernel(x, false, w, true, 1.0f, 1.0f, acc);
    std::vector<double> expected = to_double(start);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += ref[i];
    expect_close(acc, expected, 1e-5, 2e-4);
  }
}

// Two threads multiplying at once share the primitive cache; each gets its own result.
TEST(GemmKernel, ConcurrentForwardProductsAreIndependent) {
  const int64_t m = 64, k = 512, n = 96;
  Tensor w = randn({n, k}, 20);
  std::vector<Tensor> xs = {randn({m, k}, 21), randn({m, k}, 22)};
  std::vector<Tensor> outs = {Tensor::empty({m, n}), Tensor::empty({m, n})};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) gemm_kernel(xs[t], false, w, true, 1.0f, 0.0f, outs[t]);
    });
  for (std::thread& t : threads) t.join();
  // Readers refer to their values, which must outlive them.
  const std::vector<double> wv = to_double(w);
  for (int t = 0; t < 2; ++t) {
    const std::vector<double> xv = to_double(xs[t]);
    expect_close(outs[t],
                 matmul_ref(1, m, k, n, dense(xv, m, k, false), transposed(wv, k, n, false)), 1e-5,
                 2e-4);
  }
}

// out = x W^T + bias on both of the CPU kernel's paths: the matmul primitive adding the bias
// itself (few rows, long reduction, x row-major), and the bias rows filled in before a GEMM
// that accumulates (many rows, a short reduction, a column-major x or weight). Every case
// writes a slice of a NaN-filled wider buffer, which must stay NaN outside the slice.
TEST(LinearBiasKernel, MatchesFloat64OnEveryPath) {
  struct Case {
    const char* name;
    int64_t m, k, n;
    bool x_column_major, w_column_major, primitive;
  };
  const Case cases[] = {{"primitive", 45, 600, 70, false, false, true},
                        {"primitive, one row", 1, 512, 33, false, false, true},
                        {"many rows", 600, 512, 20, false, false, false},
                        {"short reduction", 45, 100, 70, false, false, false},
                        {"column-major x", 45, 600, 70, true, false, false},
                        {"column-major weight", 45, 600, 70, false, true, false}};
  const auto linear_bias = ops::kernel<ops::LinearBiasKernel>(Device::cpu());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(
        ops::cpu::matmul_primitive_suits(c.x_column_major, !c.w_column_major, c.m, c.k, 1.0f, 0.0f),
        c.primitive);
    const Tensor x =
        c.x_column_major ? transpose(randn({c.k, c.m}, 30), 0, 1) : randn({c.m, c.k}, 30);
    const Tensor w =
        c.w_column_major ? transpose(randn({c.k, c.n}, 31), 0, 1) : randn({c.n, c.k}, 31);
    const Tensor bias = randn({c.n}, 32);
    Tensor wide = Tensor::full({c.m, c.n + 9}, std::numeric_limits<float>::quiet_NaN());
    Tensor out = narrow(wide, 1, 4, c.n);
    linear_bias(x, w, bias, out);
    const std::vector<double> xv = to_double(contiguous(x)), wv = to_double(contiguous(w));
    std::vector<double> expected =
        matmul_ref(1, c.m, c.k, c.n, dense(xv, c.m, c.k, false), transposed(wv, c.k, c.n, false));
    const std::vector<double> bv = to_double(bias);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) expected[i * c.n + j] += bv[j];
    // K <= 600 sums of O(1) products: fp32 error ~ sqrt(K) * 6e-8 * 25 ~ 4e-5 absolute.
    expect_close(contiguous(out), expected, 1e-5, 2e-4);
    const std::vector<double> around = to_double(wide);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n + 9; ++j)
        if (j < 4 || j >= 4 + c.n)
          ASSERT_TRUE(std::isnan(around[i * (c.n + 9) + j])) << i << ", " << j;
  }
}

// A GPT-sized layer (256 rows of 768 features, the primitive's path) through linear, forward
// and every gradient, against float64.
TEST(Linear, PrimitiveShapeWithBiasAndGradients) {
  const int64_t rows = 256, in = 768, out_features = 96;
  Tensor x = randn({4, 64, in}, 40).set_requires_grad(true);
  Tensor w = randn({out_features, in}, 41, 0.05f).set_requires_grad(true);
  Tensor b = randn({out_features}, 42).set_requires_grad(true);
  Tensor y = linear(x, w, b);
  const std::vector<double> xv = to_double(x), wv = to_double(w), bv = to_double(b);
  expect_close(y, linear_ref(xv, wv, &bv, rows, in, out_features), 1e-5, 1e-4);
  const Tensor dy = randn({4, 64, out_features}, 43);
  y.backward(dy);
  const std::vector<double> g = to_double(dy);
  std::vector<double> dx(rows * in, 0.0), dw(out_features * in, 0.0), db(out_features, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o) {
      const double go = g[r * out_features + o];
      db[o] += go;
      for (int64_t i = 0; i < in; ++i) {
        dx[r * in + i] += go * wv[o * in + i];
        dw[o * in + i] += go * xv[r * in + i];
      }
    }
  expect_close(x.grad(), dx, 1e-5, 1e-4);
  expect_close(w.grad(), dw, 1e-5, 1e-3);
  expect_close(b.grad(), db, 1e-5, 1e-3);
}

TEST(Matmul, ShapeErrorsNameTheShapes) {
  EXPECT_ERROR_CONTAINS(matmul(randn({3, 4}, 1), randn({5, 6}, 2)), "inner dimensions 4 and 5");
  EXPECT_ERROR_CONTAINS(matmul(randn({2, 3, 4}, 1), randn({3, 4, 5}, 2)),
                        "batch dimensions differ");
  EXPECT_ERROR_CONTAINS(matmul(randn({4}, 1), randn({4, 5}, 2)), "f32[4]");
  EXPECT_ERROR_CONTAINS(matmul(randn({3, 4}, 1), Tensor::zeros({4, 2}, DType::i32)), "i32[4, 2]");
}

TEST(Linear, ShapeErrorsNameTheShapes) {
  EXPECT_ERROR_CONTAINS(linear(randn({2, 3}, 1), randn({5, 4}, 2)), "does not end in 4 features");
  EXPECT_ERROR_CONTAINS(linear(randn({2, 4}, 1), randn({5, 4}, 2), randn({4}, 3)),
                        "bias must be [5]");
  EXPECT_ERROR_CONTAINS(linear(randn({2, 4}, 1), randn({4}, 2)), "[out, in]");
}

TEST(Linear, OnlyWeightRequiresGrad) {
  // Gradients flow only where asked; x gets none, the weight gets x^T g.
  Tensor x = randn({3, 2}, 1);
  Tensor w = randn({4, 2}, 2).set_requires_grad(true);
  Tensor g = randn({3, 4}, 3);
  linear(x, w).backward(g);
  EXPECT_FALSE(x.grad().defined());
  const std::vector<double> xv = to_double(x), gv = to_double(g);
  std::vector<double> expect(8, 0.0);
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 2; ++i)
      for (int r = 0; r < 3; ++r) expect[o * 2 + i] += gv[r * 4 + o] * xv[r * 2 + i];
  expect_close(w.grad(), expect, 1e-5, 1e-6);
}

}  // namespace
}  // namespace braid::testing
