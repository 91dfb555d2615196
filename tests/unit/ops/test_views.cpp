// Views and layout ops: reshape (incl. -1 and the copying case), transpose, permute, narrow,
// contiguous, cat, split: values, storage sharing, gradients and errors.
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/views.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// Values of the strided view (shape, strides, offset) over dense `v`, in logical order.
std::vector<double> gather(const std::vector<double>& v, const Shape& shape, const Shape& strides,
                           int64_t offset) {
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t rem = i, at = offset;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      at += (rem % shape[d]) * strides[d];
      rem /= shape[d];
    }
    out[i] = v[at];
  }
  return out;
}

// A case whose output is one view of its single input, described by (shape, strides, offset)
// over the input's dense values. Views move values without arithmetic: exact.
OpCase view_case(std::string op, std::string name, Shape in, std::function<Tensor(const Tensor&)> f,
                 Shape shape, Shape strides, int64_t offset, uint64_t seed) {
  OpCase c;
  c.op = std::move(op);
  c.name = std::move(name);
  c.make_inputs = [in, seed] { return std::vector<Tensor>{randn(in, seed)}; };
  c.fn = [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
  c.reference = [shape, strides, offset](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{gather(to_double(x[0]), shape, strides, offset)};
  };
  c.rtol = c.atol = 0;
  return c;
}

std::vector<OpCase> view_cases() {
  std::vector<OpCase> cases;
  cases.push_back(view_case(
      "reshape", "reshape_infer_dim", {2, 3, 4},
      [](const Tensor& x) {
        return reshape(x, {6, -1});
      },
      {6, 4}, {4, 1}, 0, 800));
  // transpose then flatten cannot be a view: reshape must copy, and its gradient must still flow.
  cases.push_back(view_case(
      "reshape", "reshape_non_viewable_copies", {4, 3},
      [](const Tensor& x) { return reshape(transpose(x, 0, 1), {-1}); }, {12}, {1}, 0, 801));
  cases.back().reference = [](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{gather(to_double(x[0]), {3, 4}, {1, 3}, 0)};
  };
  cases.push_back(view_case(
      "transpose", "transpose_outer_dims", {2, 3, 4},
      [](const Tensor& x) { return transpose(x, 0, 2); }, {4, 3, 2}, {1, 4, 12}, 0, 802));
  cases.push_back(view_case(
      "transpose", "transpose_negative_dims", {2, 3, 4},
      [](const Tensor& x) { return transpose(x, -1, -2); }, {2, 4, 3}, {12, 1, 4}, 0, 803));
  cases.push_back(view_case(
      "permute", "permute_rotate", {2, 3, 4},
      [](const Tensor& x) {
        return permute(x, {2, 0, 1});
      },
      {4, 2, 3}, {1, 12, 4}, 0, 804));
  cases.push_back(view_case(
      "narrow", "narrow_columns", {4, 5}, [](const Tensor& x) { return narrow(x, 1, 1, 3); },
      {4, 3}, {5, 1}, 1, 805));
  cases.push_back(view_case(
      "narrow", "narrow_of_transposed", {4, 5},
      [](const Tensor& x) { return narrow(transpose(x, 0, 1), 0, 2, 2); }, {2, 4}, {1, 5}, 2, 806));
  cases.push_back(view_case(
      "contiguous", "contiguous_of_permuted", {2, 3, 4},
      [](const Tensor& x) {
        return contiguous(permute(x, {1, 2, 0}));
      },
      {3, 4, 2}, {4, 1, 12}, 0, 807));

  OpCase c;
  c.op = "cat";
  c.name = "cat_three_with_strided_part";
  c.make_inputs = [] {
    return std::vector<Tensor>{randn({2, 2}, 810), randn({3, 2}, 811), randn({2, 1}, 812)};
  };
  c.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{cat({x[0], transpose(x[1], 0, 1), x[2]}, 1)};  // [2, 2 + 3 + 1]
  };
  c.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> a = to_double(x[0]), b = to_double(x[1]), d = to_double(x[2]);
    std::vector<double> out;
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 2; ++j) out.push_back(a[r * 2 + j]);
      for (int j = 0; j < 3; ++j) out.push_back(b[j * 2 + r]);
      out.push_back(d[r]);
    }
    return std::vector<std::vector<double>>{out};
  };
  c.rtol = c.atol = 0;
  cases.push_back(c);

  OpCase c0 = c;
  c0.name = "cat_dim0";
  c0.make_inputs = [] { return std::vector<Tensor>{randn({2, 2}, 813), randn({3, 2}, 814)}; };
  // x[1] transposed is [2, 3]; its first two columns make a strided [2, 2] part.
  c0.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{cat({x[0], narrow(transpose(x[1], 0, 1), 1, 0, 2)}, 0)};
  };
  c0.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> a = to_double(x[0]), b = to_double(x[1]);
    return std::vector<std::vector<double>>{{a[0], a[1], a[2], a[3], b[0], b[2], b[1], b[3]}};
  };
  cases.push_back(c0);

  OpCase twice;
  twice.op = "cat";
  twice.name = "cat_same_tensor_twice";
  twice.make_inputs = [] { return std::vector<Tensor>{randn({2, 3}, 815)}; };
  twice.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{cat({x[0], x[0]}, 0)}; };
  twice.reference = [](const std::vector<Tensor>& x) {
    std::vector<double> v = to_double(x[0]), out = v;
    out.insert(out.end(), v.begin(), v.end());
    return std::vector<std::vector<double>>{out};
  };
  twice.rtol = twice.atol = 0;
  cases.push_back(twice);

  OpCase s;
  s.op = "split";
  s.name = "split_all_outputs";
  s.make_inputs = [] { return std::vector<Tensor>{randn({2, 7}, 820)}; };
  s.fn = [](const std::vector<Tensor>& x) { return split(x[0], {2, 3, 2}, 1); };
  s.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> v = to_double(x[0]);
    return std::vector<std::vector<double>>{
        gather(v, {2, 2}, {7, 1}, 0), gather(v, {2, 3}, {7, 1}, 2), gather(v, {2, 2}, {7, 1}, 5)};
  };
  s.rtol = s.atol = 0;
  cases.push_back(s);

  // One output of split never reaches the loss: its gradient slot must be treated as zero.
  OpCase su = s;
  su.name = "split_middle_output_unused";
  su.fn = [](const std::vector<Tensor>& x) {
    std::vector<Tensor> parts = split(x[0], {2, 3, 2}, 1);
    return std::vector<Tensor>{parts[0], parts[2]};
  };
  su.reference = [](const std::vector<Tensor>& x) {
    const std::vector<double> v = to_double(x[0]);
    return std::vector<std::vector<double>>{gather(v, {2, 2}, {7, 1}, 0),
                                            gather(v, {2, 2}, {7, 1}, 5)};
  };
  cases.push_back(su);
  return cases;
}

const OpCaseRegistrar kRegister(view_cases());

TEST(Reshape, ViewSharesStorageCopyDoesNot) {
  Tensor x = randn({4, 6}, 830);
  Tensor rows = narrow(x, 0, 1, 2);  // rows 1..2: dense in memory
  Tensor flat = reshape(rows, {12});
  EXPECT_EQ(flat.storage(), x.storage());
  EXPECT_EQ(flat.offset(), 6);
  Tensor cols = narrow(x, 1, 0, 3);  // not dense: flattening needs a copy
  Tensor copied = reshape(cols, {12});
  EXPECT_NE(copied.storage(), x.storage());
  EXPECT_TRUE(all_close(copied, gather(to_double(x), {4, 3}, {6, 1}, 0), 0, 0));
  // Splitting or padding dims with 1s keeps a strided view.
  Tensor split_rows = reshape(cols, {2, 2, 3});
  EXPECT_EQ(split_rows.storage(), x.storage());
  EXPECT_EQ(split_rows.strides(), (Shape{12, 6, 1}));
  Tensor unit = reshape(cols, {4, 1, 3});
  EXPECT_EQ(unit.storage(), x.storage());
  EXPECT_TRUE(all_close(unit, gather(to_double(x), {4, 1, 3}, {6, 3, 1}, 0), 0, 0));
  // A transposed matrix merges its dims only by copying; with a unit dim it stays a view.
  Tensor t = transpose(x, 0, 1);
  EXPECT_NE(reshape(t, {24}).storage(), x.storage());
  EXPECT_EQ(reshape(t, {6, 1, 4}).storage(), x.storage());
}

TEST(Reshape, ScalarsAndEmpty) {
  Tensor one = randn({1, 1}, 831);
  EXPECT_EQ(reshape(one, {}).dim(), 0);
  EXPECT_EQ(reshape(reshape(one, {}), {1, 1, 1}).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(reshape(Tensor::zeros({0, 3}), {3, 0}).shape(), (Shape{3, 0}));
}

TEST(Reshape, Errors) {
  Tensor x = randn({2, 3}, 832);
  EXPECT_ERROR_CONTAINS(reshape(x, {-1, -1}), "only one dimension may be -1");
  EXPECT_ERROR_CONTAINS(reshape(x, {4}), "cannot reshape f32[2, 3] (6 elements) to [4]");
  EXPECT_ERROR_CONTAINS(reshape(x, {4, -1}), "to [4, -1]");
  EXPECT_ERROR_CONTAINS(reshape(x, {-2, 3}), "negative dimension");
}

TEST(Views, TransposeAndPermuteShareStorage) {
  Tensor x = randn({2, 3, 4}, 840);
  Tensor t = transpose(x, 0, 2);
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  Tensor p = permute(x, {1, 2, 0});
  EXPECT_EQ(p.strides(), (Shape{4, 1, 12}));
  Tensor c = contiguous(p);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_TRUE(contiguous(x).same(x));  // already dense: the same handle, no copy
}

TEST(Views, Errors) {
  Tensor x = randn({2, 3, 4}, 850);
  EXPECT_ERROR_CONTAINS(permute(x, {0, 0, 1}), "dimension 0 repeated");
  EXPECT_ERROR_CONTAINS(permute(x, {0, 1}), "needs 3 dims, got 2");
  EXPECT_ERROR_CONTAINS(transpose(x, 0, 3), "dimension 3 out of range");
  EXPECT_ERROR_CONTAINS(narrow(x, 2, 3, 2), "[3, 5) is outside [0, 4)");
  EXPECT_ERROR_CONTAINS(narrow(x, 1, -1, 2), "outside [0, 3)");
  EXPECT_ERROR_CONTAINS(cat({x, randn({2, 5, 4}, 851)}, 0), "differ in dim 1");
  EXPECT_ERROR_CONTAINS(cat({x, randn({2, 3}, 852)}, 0), "f32[2, 3]");
  EXPECT_ERROR_CONTAINS(cat({}, 0), "empty list");
  EXPECT_ERROR_CONTAINS(split(x, {1, 1}, 1), "sizes summing to 2");
}

TEST(Views, SplitPartsAreViewsAndCatGradientsSlice) {
  Tensor x = randn({3, 5}, 860).set_requires_grad(true);
  std::vector<Tensor> parts = split(x, {1, 4}, 1);
  EXPECT_EQ(parts[0].storage(), x.storage());
  EXPECT_EQ(parts[1].offset(), 1);
  // Gradient of a sum of a narrow is ones on the narrowed slice, zero elsewhere.
  sum(parts[1]).backward();
  const std::vector<double> g = to_double(x.grad());
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(g[r * 5 + j], j == 0 ? 0.0 : 1.0);
}

TEST(Views, NarrowOfNarrowGradient) {
  Tensor x = randn({6}, 870).set_requires_grad(true);
  Tensor y = narrow(narrow(x, 0, 1, 4), 0, 2, 2);  // elements 3, 4
  mul(y, Tensor::from_vector(std::vector<float>{2.0f, 3.0f}, {2}))
      .backward(Tensor::full({2}, 1.0f));
  expect_close(x.grad(), {0, 0, 0, 2, 3, 0}, 0, 0);
}

}  // namespace
}  // namespace braid::testing
