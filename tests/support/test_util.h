// Test helpers: seeded random tensors, float64 views, closeness checks, a gradient checker.
//
// Every unit test binary links this library. References are written in float64 by the tests,
// and fp32 results are compared against them with tolerances the tests justify.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/tensor.h"

namespace braid::testing {

// ---- random tensors (braid's counter-based RNG, so every run sees the same values) ----------

// Standard normal values times `std` plus `mean`; value i is normal_at(seed, stream, i).
Tensor randn(const Shape& shape, uint64_t seed, float std = 1.0f, float mean = 0.0f);
// Uniform values in (lo, hi).
Tensor uniform(const Shape& shape, uint64_t seed, float lo, float hi);
// i32 ids uniform in [0, high).
Tensor random_ids(const Shape& shape, int64_t high, uint64_t seed);
std::vector<int32_t> ids_of(const Tensor& ids);

// ---- float64 views ----------------------------------------------------------------------------

// Every element of any float tensor (any layout) in logical row-major order, as double.
std::vector<double> to_double(const Tensor& t);
// A dense f32 tensor holding `values` rounded to float.
Tensor from_double(const std::vector<double>& values, const Shape& shape);
// Dense values of `v` (dense, of `shape`) permuted like braid::permute(t, order).
std::vector<double> permute_values(const std::vector<double>& v, const Shape& shape,
                                   const std::vector<int>& order);
// Row-major multi-index of flat index i ("[1, 0, 3]"), for failure messages.
std::string index_str(const Shape& shape, int64_t flat);

// ---- float64 matrix products -----------------------------------------------------------------

// Reads element (batch, row, col) of an operand given as a flat double vector, which must
// outlive the reader.
using Reader = std::function<double(int64_t, int64_t, int64_t)>;
// Dense row-major element reader for a [batch..., rows, cols] tensor (batch folded to one dim;
// not `batched`: one matrix for every batch).
Reader dense(const std::vector<double>& v, int64_t rows, int64_t cols, bool batched = true);
// Reader of op(X) = X^T for X stored dense as [batch..., cols, rows].
Reader transposed(const std::vector<double>& v, int64_t rows, int64_t cols, bool batched = true);
// C[b] = A[b] @ B[b] in double, flat row-major over (batch, M, N).
std::vector<double> matmul_ref(int64_t batches, int64_t m, int64_t k, int64_t n, const Reader& a,
                               const Reader& b);

// ---- closeness ---------------------------------------------------------------------------------

// Passes when |actual - expected| <= atol + rtol * |expected| for every element. On failure the
// message names the worst element (largest excess over its bound), its index and both values.
::testing::AssertionResult all_close(const std::vector<double>& actual,
                                     const std::vector<double>& expected, double rtol, double atol,
                                     const Shape& shape = {});
::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected,
                                     double rtol, double atol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol);

// EXPECT-style wrappers reporting the caller's file and line.
void expect_close(const Tensor& actual, const std::vector<double>& expected, double rtol,
                  double atol, std::source_location where = std::source_location::current());
void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                  std::source_location where = std::source_location::current());
void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                  double rtol, double atol,
                  std::source_location where = std::source_location::current());

// Bitwise equality of two f32 tensors (same shape, same bits in logical order); the message
// names the first differing element.
::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b);

// ---- finite-difference gradient checks
// -----------------------------------------------------------

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using SingleFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradCheckOptions {
  // Central-difference step and tolerance; see the justification in test_util.cpp.
  double eps = 1e-2;
  double tol = 3e-3;
  // Inputs with more elements than this are checked on a fixed random subset of this many
  // elements (always including the first and last), plus one random directional derivative
  // that covers every element.
  int64_t max_elements = 192;
  uint64_t seed = 1234;
  // Which inputs to check (empty: all).
  std::vector<bool> check;
};

// Builds leaf copies of `inputs` (f32, requiring grad), runs fn, forms
//   L = sum_k sum_j out_k[j] * w_k[j]   (w_k fixed random N(0, 1), L accumulated in double)
// and compares dL/dinput from autograd (backward with gradient w_k) against central
// differences of L. Outputs that do not require grad (or are undefined) take no part.
::testing::AssertionResult check_gradients(const MultiFn& fn, const std::vector<Tensor>& inputs,
                                           const GradCheckOptions& options = {});
::testing::AssertionResult check_gradients(const SingleFn& fn, const std::vector<Tensor>& inputs,
                                           const GradCheckOptions& options = {});

// ---- the op test table
// ---------------------------------------------------------------------------

// One entry per op configuration: every op of braid/ops is checked uniformly forward against a
// float64 reference and backward against finite differences (tests/unit/ops/test_op_table.cpp).
struct OpCase {
  std::string op;    // the op's name in braid/ops (used to prove every op has an entry)
  std::string name;  // unique case name: letters, digits and '_'
  std::function<std::vector<Tensor>()> make_inputs;  // the differentiable f32 inputs
  MultiFn fn;                                        // runs the op (integer inputs captured)
  // float64 outputs computed from the inputs' values, one vector per output of fn.
  std::function<std::vector<std::vector<double>>(const std::vector<Tensor>&)> reference;
  double rtol = 1e-5, atol = 1e-5;  // forward tolerance against the reference
  GradCheckOptions grad;
};

// The process-wide table; test files add to it at static initialisation.
std::vector<OpCase>& op_cases();
struct OpCaseRegistrar {
  explicit OpCaseRegistrar(std::vector<OpCase> cases);
};

// Passes when `text` contains `part`, and shows the whole text when it does not.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// The message of the braid::Error `fn` throws; a test failure when it throws nothing.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a braid::Error";
  return {};
}

}  // namespace braid::testing

// Expects `stmt` to throw braid::Error whose message contains `substring`.
#define EXPECT_ERROR_CONTAINS(stmt, substring)                                                   \
  do {                                                                                           \
    try {                                                                                        \
      stmt;                                                                                      \
      ADD_FAILURE() << "expected braid::Error from: " #stmt;                                     \
    } catch (const ::braid::Error& braid_error_) {                                               \
      const std::string braid_what_ = braid_error_.what();                                       \
      EXPECT_NE(braid_what_.find(substring), std::string::npos)                                  \
          << "error from " #stmt " does not mention \"" << (substring) << "\": " << braid_what_; \
    } catch (const std::exception& braid_other_) {                                               \
      ADD_FAILURE() << #stmt " threw a non-braid exception: " << braid_other_.what();            \
    }                                                                                            \
  } while (0)
