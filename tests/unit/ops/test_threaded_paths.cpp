// Sizes above the kernels' OpenMP thresholds (2^14..2^16 elements), so the threaded code paths
// (row ranges per thread, per-thread partial sums, column-split scatter) are checked as well.
// Forward against float64 loops, backward against closed forms (finite differences would cost
// one forward per element here).
#include <cmath>

#include "braid/ops.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

TEST(ThreadedPaths, BroadcastAndStridedBinary) {
  const int64_t rows = 96, cols = 700;  // 67200 elements
  Tensor a = randn({rows, cols}, 1), bias = randn({cols}, 2), col = randn({rows, 1}, 3);
  Tensor at = transpose(randn({cols, rows}, 4), 0, 1);  // strided [rows, cols]
  const std::vector<double> av = to_double(a), bv = to_double(bias), cv = to_double(col),
                            tv = to_double(at);
  std::vector<double> e1(rows * cols), e2(rows * cols), e3(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      e1[i] = static_cast<float>(av[i] + bv[c]);
      e2[i] = static_cast<float>(tv[i] * cv[r]);
      e3[i] = static_cast<float>(av[i] - tv[i]);
    }
  // One fp32 operation per element: the reference rounded once is exact.
  expect_close(add(a, bias), e1, 0, 0);
  expect_close(mul(at, col), e2, 0, 0);
  expect_close(sub(a, at), e3, 0, 0);
  // Broadcast gradients reduce over many rows: bias grad = column sums, col grad = row sums of
  // g * at. Sums of 96 or 700 O(1) terms in fp32 or double: 1e-5 relative + 1e-4 absolute.
  Tensor b = bias.detach().clone().set_requires_grad(true);
  Tensor c = col.detach().clone().set_requires_grad(true);
  Tensor g = randn({rows, cols}, 5);
  const std::vector<double> gv = to_double(g);
  add(mul(at, c), add(a, b)).backward(g);
  std::vector<double> db(cols, 0.0), dc(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      db[k] += gv[r * cols + k];
      dc[r] += gv[r * cols + k] * tv[r * cols + k];
    }
  expect_close(b.grad(), db, 1e-5, 1e-4);
  expect_close(c.grad(), dc, 1e-5, 1e-4);
}

TEST(ThreadedPaths, CopyConvertsLargeStridedViews) {
  Tensor src = randn({300, 250}, 10);  // 75000 elements > 2^16
  Tensor dst = Tensor::zeros({250, 300}, DType::bf16);
  dst.copy_(transpose(src, 0, 1));
  const std::vector<float> d = dst.to_vector(), s = src.to_vector();
  for (int64_t i = 0; i < 250; ++i)
    for (int64_t j = 0; j < 300; ++j)
      ASSERT_EQ(d[i * 300 + j], bf16_to_f32(f32_to_bf16(s[j * 250 + i]))) << i << "," << j;
}

TEST(ThreadedPaths, ActivationsAndNorm) {
  const int64_t rows = 300, c = 64;  // 19200 elements > 2^14
  Tensor x = randn({rows, c}, 20, 2.0f);
  const std::vector<double> xv = to_double(x);
  std::vector<double> ge(xv.size()), se(xv.size()), le(xv.size());
  const double k = std::sqrt(2.0 / M_PI);
  for (size_t i = 0; i < xv.size(); ++i)
    ge[i] = 0.5 * xv[i] * (1 + std::tanh(k * (xv[i] + 0.044715 * xv[i] * xv[i] * xv[i])));
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, total = 0, mean = 0, var = 0;
    for (int64_t i = 0; i < c; ++i) mx = std::max(mx, xv[r * c + i]);
    for (int64_t i = 0; i < c; ++i) total += std::exp(xv[r * c + i] - mx);
    for (int64_t i = 0; i < c; ++i) se[r * c + i] = std::exp(xv[r * c + i] - mx) / total;
    for (int64_t i = 0; i < c; ++i) mean += xv[r * c + i] / c;
    for (int64_t i = 0; i < c; ++i) var += (xv[r * c + i] - mean) * (xv[r * c + i] - mean) / c;
    for (int64_t i = 0; i < c; ++i) le[r * c + i] = (xv[r * c + i] - mean) / std::sqrt(var + 1e-5);
  }
  expect_close(gelu(x), ge, 1e-5, 1e-6);
  expect_close(softmax(x), se, 1e-5, 1e-7);
  Tensor ones = Tensor::full({c}, 1.0f), zeros = Tensor::zeros({c});
  expect_close(layer_norm(x, ones, zeros), le, 1e-5, 1e-5);

  // Layer-norm weight/bias gradients sum per-thread partials over 300 rows:
  // dbias = sum_r g, dweight = sum_r g * xhat. 300 O(1) terms: 1e-5 relative + 1e-4 absolute.
  Tensor w = randn({c}, 21).set_requires_grad(true), b = randn({c}, 22).set_requires_grad(true);
  Tensor g = randn({rows, c}, 23);
  layer_norm(x, w, b).backward(g);
  const std::vector<double> gv = to_double(g);
  std::vector<double> dw(c, 0.0), db(c, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < c; ++i) {
      dw[i] += gv[r * c + i] * le[r * c + i];
      db[i] += gv[r * c + i];
    }
  expect_close(w.grad(), dw, 1e-5, 1e-4);
  expect_close(b.grad(), db, 1e-5, 1e-4);
}

TEST(ThreadedPaths, EmbeddingScatterAndCrossEntropy) {
  const int64_t v = 40, c = 96, n = 512;  // n * c = 49152 > 2^15: column-split scatter
  Tensor w = randn({v, c}, 30).set_requires_grad(true);
  Tensor ids = random_ids({n}, v, 31);
  Tensor g = randn({n, c}, 32);
  embedding(w, ids).backward(g);
  const std::vector<int32_t> id = ids_of(ids);
  const std::vector<double> gv = to_double(g);
  std::vector<double> dw(v * c, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) dw[id[i] * c + j] += gv[i * c + j];
  // Each row sums ~13 fp32 terms: 1e-5 relative + 1e-5 absolute.
  expect_close(w.grad(), dw, 1e-5, 1e-5);

  // Cross-entropy over many rows (its kernels always run threaded), padded and with ignores.
  const int64_t rows = 600, vp = 48, classes = 45;
  Tensor logits = randn({rows, vp}, 33, 2.0f).set_requires_grad(true);
  std::vector<int32_t> t = ids_of(random_ids({rows}, classes, 34));
  for (int64_t r = 0; r < rows; r += 7) t[r] = -1;
  cross_entropy(logits, Tensor::from_vector(t, {rows}), classes).backward();
  const std::vector<double> lv = to_double(logits);
  std::vector<double> dl(rows * vp, 0.0);
  int64_t counted = 0;
  for (int32_t target : t) counted += target >= 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] < 0) continue;
    double mx = -INFINITY, total = 0;
    for (int64_t i = 0; i < classes; ++i) mx = std::max(mx, lv[r * vp + i]);
    for (int64_t i = 0; i < classes; ++i) total += std::exp(lv[r * vp + i] - mx);
    for (int64_t i = 0; i < classes; ++i)
      dl[r * vp + i] = std::exp(lv[r * vp + i] - mx) / total / counted;
    dl[r * vp + t[r]] -= 1.0 / counted;
  }
  expect_close(logits.grad(), dl, 1e-5, 1e-9);
}

TEST(ThreadedPaths, LargeSumToShape) {
  Tensor x = randn({40, 30, 50}, 40);  // 60000 elements
  const std::vector<double> v = to_double(x);
  std::vector<double> e0(30 * 50, 0.0), e1(40, 0.0);
  for (int64_t a = 0; a < 40; ++a)
    for (int64_t b = 0; b < 30; ++b)
      for (int64_t c = 0; c < 50; ++c) {
        e0[b * 50 + c] += v[(a * 30 + b) * 50 + c];
        e1[a] += v[(a * 30 + b) * 50 + c];
      }
  // 40 and 1500 O(1) terms: 1e-5 relative + 1e-4 absolute.
  expect_close(sum_to_shape(x, {30, 50}), e0, 1e-5, 1e-4);
  expect_close(sum_to_shape(x, {40, 1, 1}), e1, 1e-5, 1e-4);
}

}  // namespace
}  // namespace braid::testing
