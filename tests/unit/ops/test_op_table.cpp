// The op test table: every registered op case, forward against float64, backward against finite
// differences. Op families register their cases from their own test files (OpCaseRegistrar).
#include <set>
#include <string>

#include "braid/autograd/grad_mode.h"
#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

class OpTable : public ::testing::TestWithParam<size_t> {
 protected:
  const OpCase& op_case() const { return op_cases().at(GetParam()); }
};

TEST_P(OpTable, ForwardMatchesFloat64Reference) {
  const OpCase& c = op_case();
  const std::vector<Tensor> inputs = c.make_inputs();
  std::vector<Tensor> outputs;
  {
    autograd::NoGradGuard no_grad;
    outputs = c.fn(inputs);
  }
  const std::vector<std::vector<double>> expected = c.reference(inputs);
  ASSERT_EQ(outputs.size(), expected.size()) << c.name;
  for (size_t k = 0; k < outputs.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k) + " of " + c.name);
    EXPECT_TRUE(all_close(outputs[k], expected[k], c.rtol, c.atol));
  }
}

TEST_P(OpTable, BackwardMatchesFiniteDifferences) {
  const OpCase& c = op_case();
  EXPECT_TRUE(check_gradients(c.fn, c.make_inputs(), c.grad)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpTable, ::testing::Range<size_t>(0, op_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases().at(info.param).name;
                         });

// Adding an op means adding a table entry: this list is every differentiable op declared in
// include/braid/ops/*.h.
TEST(OpTableCoverage, EveryOpHasAnEntry) {
  const std::set<std::string> all_ops{"add",
                                      "sub",
                                      "mul",
                                      "scale",
                                      "sum",
                                      "mean",
                                      "matmul",
                                      "linear",
                                      "gelu",
                                      "softmax",
                                      "layer_norm",
                                      "attention",
                                      "causal_self_attention",
                                      "embedding",
                                      "cross_entropy",
                                      "reshape",
                                      "transpose",
                                      "permute",
                                      "narrow",
                                      "contiguous",
                                      "cat",
                                      "split"};
  std::set<std::string> covered, names;
  for (const OpCase& c : op_cases()) {
    covered.insert(c.op);
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
    EXPECT_TRUE(all_ops.count(c.op)) << "case " << c.name << " names unknown op " << c.op;
  }
  for (const std::string& op : all_ops)
    EXPECT_TRUE(covered.count(op)) << op << " has no table entry";
}

// y = 3 x whose recorded backward adds `delta` to one element of the input gradient.
Tensor faulty_triple(const Tensor& x, int64_t bad, float delta) {
  Tensor out = scale(x.detach(), 3.0f);
  if (autograd::needs_grad({&x})) {
    autograd::record("FaultyTriple", {x}, {&out}, [bad, delta](const std::vector<Tensor>& g) {
      Tensor d = scale(g[0], 3.0f);
      d.data<float>()[bad] += delta;
      return std::vector<Tensor>{d};
    });
  }
  return out;
}

// The checker must fail on a backward that is wrong in a single element, else a passing table
// proves nothing. The true gradient is 3 w with w ~ N(0, 1), so its RMS is ~3; an error of 5% of
// that scale in one element is far outside the 3e-3 relative tolerance.
TEST(GradientChecker, CatchesAWrongElement) {
  const std::vector<Tensor> inputs{randn({4, 5}, 900)};
  auto with_delta = [](int64_t bad, float delta) {
    return SingleFn(
        [bad, delta](const std::vector<Tensor>& x) { return faulty_triple(x[0], bad, delta); });
  };
  EXPECT_TRUE(check_gradients(with_delta(13, 0.0f), inputs));
  const auto wrong = check_gradients(with_delta(13, 0.15f), inputs);
  EXPECT_FALSE(wrong);
  EXPECT_NE(std::string(wrong.message()).find("[2, 3]"), std::string::npos) << wrong.message();
  // A subset check still covers the first and last element.
  GradCheckOptions subset;
  subset.max_elements = 2;
  EXPECT_FALSE(check_gradients(with_delta(19, 0.15f), inputs, subset));
  EXPECT_FALSE(check_gradients(with_delta(0, -0.15f), inputs, subset));
}

TEST(AllClose, ReportsWorstElementAndIndex) {
  Tensor a = Tensor::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  const auto r = all_close(a, {1.0, 2.0, 3.0, 4.0, 5.5, 6.1}, 0, 1e-3);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("2 of 6 elements differ"), std::string::npos)
      << r.message();
  EXPECT_NE(std::string(r.message()).find("worst at [1, 1]"), std::string::npos) << r.message();
  EXPECT_TRUE(all_close(a, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, 0, 0));
  EXPECT_FALSE(all_close(a, {1.0, 2.0}, 1, 1));
  EXPECT_FALSE(all_close(Tensor::from_vector(std::vector<float>{NAN}, {1}), {0.0}, 1, 1));
}

}  // namespace
}  // namespace braid::testing
