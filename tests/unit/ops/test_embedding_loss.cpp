// embedding (repeated and bad ids) and cross_entropy (ignore_index, padded vocab, bad targets).
#include <cmath>

#include "braid/core/allocator.h"
#include "braid/ops/embedding.h"
#include "braid/ops/loss.h"
#include "braid/ops/matmul.h"
#include "braid/ops/views.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

std::vector<double> embedding_ref(const std::vector<double>& w, const std::vector<int32_t>& ids,
                                  int64_t c) {
  std::vector<double> out;
  for (int32_t id : ids)
    for (int64_t j = 0; j < c; ++j) out.push_back(w[id * c + j]);
  return out;
}

// Mean over non-ignored rows of lse(row[:V]) - row[target], rows of length vp.
double cross_entropy_ref(const std::vector<double>& logits, const std::vector<int32_t>& targets,
                         int64_t vp, int64_t v, int64_t ignore_index) {
  double total = 0;
  int64_t counted = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == ignore_index) continue;
    const double* row = logits.data() + r * vp;
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < v; ++i) mx = std::max(mx, row[i]);
    for (int64_t i = 0; i < v; ++i) s += std::exp(row[i] - mx);
    total += mx + std::log(s) - row[targets[r]];
    ++counted;
  }
  return counted ? total / static_cast<double>(counted) : 0.0;
}

std::vector<OpCase> embedding_loss_cases() {
  std::vector<OpCase> cases;
  // Gathers are exact copies.
  const std::vector<int32_t> ids{3, 0, 3, 6, 1, 3, 0, 2};  // 3 three times, 0 twice
  OpCase e;
  e.op = "embedding";
  e.name = "embedding_repeated_ids";
  e.make_inputs = [] { return std::vector<Tensor>{randn({7, 5}, 700)}; };
  e.fn = [ids](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{embedding(x[0], Tensor::from_vector(ids, {2, 4}))};
  };
  e.reference = [ids](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{embedding_ref(to_double(x[0]), ids, 5)};
  };
  e.rtol = e.atol = 0;
  cases.push_back(e);

  // Cross-entropy: a log-sum-exp of O(1) logits and one subtraction per row, averaged: 1e-5.
  const std::vector<int32_t> targets{2, -1, 5, 0, 4, -1};
  OpCase ce;
  ce.op = "cross_entropy";
  ce.name = "cross_entropy_ignore_rows";
  ce.make_inputs = [] { return std::vector<Tensor>{randn({2, 3, 6}, 710, 2.0f)}; };
  ce.fn = [targets](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{cross_entropy(x[0], Tensor::from_vector(targets, {2, 3}))};
  };
  ce.reference = [targets](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{
        {cross_entropy_ref(to_double(x[0]), targets, 6, 6, kIgnoreIndex)}};
  };
  cases.push_back(ce);

  const std::vector<int32_t> padded_targets{4, 0, -1, 2, 1};
  OpCase padded;
  padded.op = "cross_entropy";
  padded.name = "cross_entropy_padded_vocab";
  padded.make_inputs = [] { return std::vector<Tensor>{randn({5, 8}, 720, 2.0f)}; };
  padded.fn = [padded_targets](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{cross_entropy(x[0], Tensor::from_vector(padded_targets, {5}), 5)};
  };
  padded.reference = [padded_targets](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{
        {cross_entropy_ref(to_double(x[0]), padded_targets, 8, 5, kIgnoreIndex)}};
  };
  cases.push_back(padded);
  return cases;
}

const OpCaseRegistrar kRegister(embedding_loss_cases());

TEST(Embedding, RepeatedIdsAccumulateGradient) {
  Tensor w = randn({4, 3}, 730).set_requires_grad(true);
  const std::vector<int32_t> ids{1, 1, 3, 1};
  Tensor g = randn({4, 3}, 731);
  embedding(w, Tensor::from_vector(ids, {4})).backward(g);
  const std::vector<double> gv = to_double(g);
  std::vector<double> expect(12, 0.0);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 3; ++j) expect[ids[n] * 3 + j] += gv[n * 3 + j];
  expect_close(w.grad(), expect, 1e-6, 1e-7);
  // Rows 0 and 2 are never selected: exactly zero.
  const std::vector<double> dw = to_double(w.grad());
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(dw[0 * 3 + j], 0.0);
    EXPECT_EQ(dw[2 * 3 + j], 0.0);
  }
}

TEST(Embedding, StridedIdsAndWeight) {
  Tensor w = randn({3, 6}, 740);
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 2, 1, 0}, {2, 3});
  Tensor wt = transpose(randn({6, 3}, 741), 0, 1);  // [3, 6] strided weight
  Tensor idt = transpose(ids, 0, 1);                // [3, 2] strided ids
  EXPECT_TRUE(all_close(embedding(wt, idt), embedding_ref(to_double(wt), ids_of(idt), 6), 0, 0));
  EXPECT_EQ(embedding(w, idt).shape(), (Shape{3, 2, 6}));
}

TEST(Embedding, OutOfRangeIdNamesTheId) {
  Tensor w = randn({5, 2}, 750);
  EXPECT_ERROR_CONTAINS(embedding(w, Tensor::from_vector(std::vector<int32_t>{0, 4, 7}, {3})),
                        "token id 7 at position 2");
  EXPECT_ERROR_CONTAINS(embedding(w, Tensor::from_vector(std::vector<int32_t>{-1}, {1})),
                        "token id -1");
  EXPECT_ERROR_CONTAINS(embedding(w, Tensor::from_vector(std::vector<int32_t>{5}, {1})), "[0, 5)");
  EXPECT_ERROR_CONTAINS(embedding(w, randn({2}, 1)), "ids must be i32");
  EXPECT_ERROR_CONTAINS(embedding(randn({5}, 1), Tensor::from_vector(std::vector<int32_t>{0}, {1})),
                        "f32[5]");
}

// Padding columns (num_classes <= j < Vp) take no part: the loss equals the unpadded loss and
// their gradient is exactly zero. The kernel runs the same operations on the real columns, so
// the two computations agree bit for bit.
TEST(CrossEntropy, PaddedColumnsDoNotChangeLossOrGetGradient) {
  const int64_t n = 6, v = 5, vp = 8;
  Tensor padded = randn({n, vp}, 760, 3.0f).set_requires_grad(true);
  // Large values on the padding, to be sure they are excluded from the log-sum-exp.
  {
    Tensor pad = padded.detach().narrow(1, v, vp - v);
    pad.fill_(50.0f);
  }
  Tensor plain = contiguous(narrow(padded.detach(), 1, 0, v)).set_requires_grad(true);
  Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 4, -1, 2, 3, 1}, {n});
  Tensor loss_padded = cross_entropy(padded, targets, v);
  Tensor loss_plain = cross_entropy(plain, targets);
  EXPECT_EQ(loss_padded.item(), loss_plain.item());
  EXPECT_NEAR(loss_plain.item(), cross_entropy_ref(to_double(plain), ids_of(targets), v, v, -1),
              1e-5 * std::abs(loss_plain.item()));
  loss_padded.backward();
  loss_plain.backward();
  const std::vector<double> gp = to_double(padded.grad()), g = to_double(plain.grad());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < v; ++j) EXPECT_EQ(gp[r * vp + j], g[r * v + j]) << r << "," << j;
    for (int64_t j = v; j < vp; ++j) EXPECT_EQ(gp[r * vp + j], 0.0) << "padding " << r << "," << j;
  }
  // The ignored row has no gradient at all.
  for (int64_t j = 0; j < v; ++j) EXPECT_EQ(g[2 * v + j], 0.0);
}

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHotOverCount) {
  Tensor logits = randn({3, 4}, 770).set_requires_grad(true);
  const std::vector<int32_t> t{1, -1, 3};
  cross_entropy(logits, Tensor::from_vector(t, {3})).backward();
  const std::vector<double> x = to_double(logits);
  std::vector<double> expect(12, 0.0);
  for (int r : {0, 2}) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < 4; ++i) mx = std::max(mx, x[r * 4 + i]);
    for (int i = 0; i < 4; ++i) s += std::exp(x[r * 4 + i] - mx);
    for (int i = 0; i < 4; ++i) expect[r * 4 + i] = std::exp(x[r * 4 + i] - mx) / s / 2.0;
    expect[r * 4 + t[r]] -= 0.5;
  }
  expect_close(logits.grad(), expect, 1e-5, 1e-7);
}

TEST(CrossEntropy, CustomIgnoreIndexAndAllIgnored) {
  Tensor logits = randn({4, 3}, 780);
  const std::vector<int32_t> t{2, 1, 2, 0};
  const double expect = cross_entropy_ref(to_double(logits), t, 3, 3, 2);
  EXPECT_NEAR(cross_entropy(logits, Tensor::from_vector(t, {4}), -1, 2).item(), expect,
              1e-5 * std::abs(expect));
  // Every target ignored: 0 (not NaN), and a zero gradient.
  Tensor l = randn({2, 3}, 781).set_requires_grad(true);
  Tensor loss = cross_entropy(l, Tensor::from_vector(std::vector<int32_t>{-1, -1}, {2}));
  EXPECT_EQ(loss.item(), 0.0f);
  loss.backward();
  for (double g : to_double(l.grad())) EXPECT_EQ(g, 0.0);
}

// Logits given up (std::move, or a temporary) become their own gradient on the CPU: the same
// loss and gradients to the bit, without a logits-sized gradient buffer. Logits someone still
// holds, directly or through another view, are never written.
TEST(CrossEntropy, GivenUpLogitsBecomeTheirGradient) {
  const int64_t n = 5, v = 37, vp = 40;
  Tensor x = randn({n, 16}, 800);
  Tensor w_held = randn({vp, 16}, 801).set_requires_grad(true);
  Tensor w_given = w_held.detach().clone().set_requires_grad(true);
  Tensor targets = Tensor::from_vector(std::vector<int32_t>{3, -1, 36, 0, 12}, {n});

  Tensor held = linear(x, w_held);
  const std::vector<double> held_before = to_double(held);
  int64_t allocations = host_memory_stats().allocations;
  Tensor loss_held = cross_entropy(held, targets, v);
  const int64_t held_allocations = host_memory_stats().allocations - allocations;
  EXPECT_EQ(to_double(held), held_before) << "held logits were written";
  loss_held.backward();

  Tensor given = linear(x, w_given);
  allocations = host_memory_stats().allocations;
  Tensor loss_given = cross_entropy(std::move(given), targets, v);
  EXPECT_EQ(host_memory_stats().allocations - allocations, held_allocations - 1)
      << "given-up logits should hold their own gradient";
  // The target's logit is read before its row is overwritten, so the loss is the same too.
  EXPECT_EQ(loss_given.item(), loss_held.item());
  loss_given.backward();
  expect_close(w_given.grad(), to_double(w_held.grad()), 0, 0);

  // A temporary view of logits that are still held elsewhere.
  Tensor base = linear(x, w_given);
  const std::vector<double> base_before = to_double(base);
  cross_entropy(narrow(base, 1, 0, vp), targets, v).backward();
  EXPECT_EQ(to_double(base), base_before) << "logits seen through another view were written";
}

TEST(CrossEntropy, BadTargetsNameTheValue) {
  Tensor logits = randn({4, 8}, 790);
  EXPECT_ERROR_CONTAINS(
      cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 9}, {4})),
      "target 9 at position 3");
  // With padding, a target in the padding columns is out of range too.
  EXPECT_ERROR_CONTAINS(
      cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, 6, 2, 1}, {4}), 5),
      "target 6 at position 1 is outside [0, 5)");
  EXPECT_ERROR_CONTAINS(
      cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, -3, 2, 1}, {4})),
      "target -3");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, 1}, {2})),
                        "i32[2]");
  EXPECT_ERROR_CONTAINS(
      cross_entropy(logits, Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3}, {4}), 9),
      "over 9 classes");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, randn({4}, 1)), "targets must be i32");
}

}  // namespace
}  // namespace braid::testing
