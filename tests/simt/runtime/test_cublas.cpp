// The emulated cuBLAS: cublasSgemmStridedBatched against an independent float64 loop for every
// transpose, padding, stride and batch; alpha/beta rules; each invalid argument's status; and the
// memory faults a kernel would have (bounds, uninitialised reads, alignment, overlaps).
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime_test_util.h"
#include "simt/device_memory.h"
#include "simt/fault.h"

namespace braid::simt {
namespace {

using testing::DeviceBuffer;
using testing::download;
using testing::upload;

struct Gemm {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int m = 5, n = 7, k = 9;
  int lda = 0, ldb = 0, ldc = 0;        // 0: the smallest legal value plus 3 (padded)
  long long sa = -1, sb = -1, sc = -1;  // -1: one matrix plus 11 elements
  int batch = 3;
  float alpha = 1.0f, beta = 0.0f;

  int a_rows() const { return ta == CUBLAS_OP_N ? m : k; }
  int a_cols() const { return ta == CUBLAS_OP_N ? k : m; }
  int b_rows() const { return tb == CUBLAS_OP_N ? k : n; }
  int b_cols() const { return tb == CUBLAS_OP_N ? n : k; }
  Gemm& resolve() {
    if (lda == 0) lda = a_rows() + 3;
    if (ldb == 0) ldb = b_rows() + 3;
    if (ldc == 0) ldc = m + 3;
    if (sa < 0) sa = static_cast<long long>(lda) * a_cols() + 11;
    if (sb < 0) sb = static_cast<long long>(ldb) * b_cols() + 11;
    if (sc < 0) sc = static_cast<long long>(ldc) * n + 11;
    return *this;
  }
  size_t a_size() const { return static_cast<size_t>(sa) * (batch - 1) + lda * a_cols(); }
  size_t b_size() const { return static_cast<size_t>(sb) * (batch - 1) + ldb * b_cols(); }
  size_t c_size() const { return static_cast<size_t>(sc) * (batch - 1) + ldc * n; }
};

// The definition, column-major: C(i, j) = alpha * sum_l op(A)(i, l) op(B)(l, j) + beta * C(i, j),
// summed in float64 in order of l and rounded once (what the emulator promises, bit for bit).
std::vector<float> reference(const Gemm& g, const std::vector<float>& a,
                             const std::vector<float>& b, std::vector<float> c) {
  for (int batch = 0; batch < g.batch; ++batch)
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        double sum = 0.0;
        for (int l = 0; l < g.k; ++l) {
          const float x = g.ta == CUBLAS_OP_N ? a[batch * g.sa + l * g.lda + i]
                                              : a[batch * g.sa + i * g.lda + l];
          const float y = g.tb == CUBLAS_OP_N ? b[batch * g.sb + j * g.ldb + l]
                                              : b[batch * g.sb + l * g.ldb + j];
          sum += static_cast<double>(x) * static_cast<double>(y);
        }
        float& out = c[batch * g.sc + j * g.ldc + i];
        double value = static_cast<double>(g.alpha) * sum;
        if (g.beta != 0.0f) value += static_cast<double>(g.beta) * static_cast<double>(out);
        out = static_cast<float>(value);
      }
  return c;
}

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class CublasTest : public testing::RuntimeTest {
 protected:
  void SetUp() override {
    testing::RuntimeTest::SetUp();
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    testing::RuntimeTest::TearDown();
  }
  cublasStatus_t call(const Gemm& g, const float* a, const float* b, float* c) {
    return cublasSgemmStridedBatched(handle_, g.ta, g.tb, g.m, g.n, g.k, &g.alpha, a, g.lda, g.sa,
                                     b, g.ldb, g.sb, &g.beta, c, g.ldc, g.sc, g.batch);
  }
  // Runs `g` on random inputs (C initialised when beta reads it) and compares with reference().
  void check(Gemm g, unsigned seed) {
    g.resolve();
    const std::vector<float> a = random_values(g.a_size(), seed);
    const std::vector<float> b = random_values(g.b_size(), seed + 1);
    const std::vector<float> c = random_values(g.c_size(), seed + 2);
    DeviceBuffer da(4 * a.size()), db(4 * b.size()), dc(4 * c.size());
    upload(da.get(), a);
    upload(db.get(), b);
    upload(dc.get(), c);
    ASSERT_EQ(call(g, da.get<float>(), db.get<float>(), dc.get<float>()), CUBLAS_STATUS_SUCCESS);
    const std::vector<float> want = reference(g, a, b, c);
    const std::vector<float> got = download<float>(dc.get(), c.size());
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
          << "element " << i << ": " << got[i] << " vs " << want[i] << " (ta " << g.ta << ", tb "
          << g.tb << ")";
  }
  cublasHandle_t handle_ = nullptr;
};

// The message of the KernelFault `f` throws (empty when it throws none).
std::string fault_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const KernelFault& fault) {
    return fault.what();
  }
  return "";
}

TEST_F(CublasTest, EveryTransposeCombinationMatchesTheDefinition) {
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
  unsigned seed = 1;
  for (cublasOperation_t ta : ops)
    for (cublasOperation_t tb : ops) {
      Gemm g;
      g.ta = ta;
      g.tb = tb;
      g.alpha = 0.75f;
      g.beta = -1.5f;
      check(g, seed += 3);
    }
}

TEST_F(CublasTest, TightAndPaddedLayoutsAndBatches) {
  Gemm tight;
  tight.lda = tight.m;
  tight.ldb = tight.k;
  tight.ldc = tight.m;
  tight.sa = tight.m * tight.k;
  tight.sb = tight.k * tight.n;
  tight.sc = tight.m * tight.n;
  check(tight, 100);
  Gemm one;
  one.batch = 1;
  one.m = 1;
  one.n = 1;
  one.k = 33;
  check(one, 200);
  Gemm broadcast;  // one A for every batch
  broadcast.sa = 0;
  broadcast.batch = 4;
  check(broadcast, 300);
  Gemm interleaved;  // batches interleaved by column without sharing an element
  interleaved.m = 4;
  interleaved.ldc = 8;
  interleaved.sc = 4;
  interleaved.batch = 2;
  check(interleaved, 400);
}

TEST_F(CublasTest, BetaZeroNeverReadsC) {
  Gemm g;
  g.resolve();
  const std::vector<float> a = random_values(g.a_size(), 7), b = random_values(g.b_size(), 8);
  DeviceBuffer da(4 * a.size()), db(4 * b.size()), dc(4 * g.c_size());
  upload(da.get(), a);
  upload(db.get(), b);
  // C was never written: poisoned NaN and uninitialised. beta == 0 must neither read nor fault.
  ASSERT_EQ(call(g, da.get<float>(), db.get<float>(), dc.get<float>()), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = download<float>(dc.get(), g.c_size());
  const std::vector<float> want = reference(g, a, b, std::vector<float>(g.c_size(), NAN));
  for (int batch = 0; batch < g.batch; ++batch)
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        const size_t e = batch * g.sc + j * g.ldc + i;
        ASSERT_FALSE(std::isnan(got[e])) << e;
        ASSERT_EQ(got[e], want[e]) << e;
        EXPECT_EQ(first_uninitialized(dc.get<float>() + e, 4), nullptr) << e;
      }
  // What the call did not write (the padding rows) stays unwritten.
  EXPECT_EQ(first_uninitialized(dc.get<float>() + g.m, 4), dc.get<float>() + g.m);
}

TEST_F(CublasTest, AlphaZeroOrEmptySumNeverReadsAOrB) {
  Gemm g;
  g.alpha = 0.0f;
  g.beta = 2.0f;
  g.resolve();
  const std::vector<float> c = random_values(g.c_size(), 9);
  DeviceBuffer da(4 * g.a_size()), db(4 * g.b_size()), dc(4 * c.size());  // A, B never written
  upload(dc.get(), c);
  ASSERT_EQ(call(g, da.get<float>(), db.get<float>(), dc.get<float>()), CUBLAS_STATUS_SUCCESS);
  std::vector<float> got = download<float>(dc.get(), c.size());
  for (int j = 0; j < g.n; ++j)
    for (int i = 0; i < g.m; ++i) ASSERT_EQ(got[j * g.ldc + i], 2.0f * c[j * g.ldc + i]);
  // k == 0: C = beta * C as well, with alpha anything.
  Gemm empty = g;
  empty.k = 0;
  empty.alpha = 5.0f;
  empty.beta = 0.5f;
  ASSERT_EQ(call(empty, nullptr, nullptr, dc.get<float>()), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> halved = download<float>(dc.get(), c.size());
  EXPECT_EQ(halved[0], 0.5f * got[0]);
  // alpha == 0 and beta == 1: nothing to do, so even an unwritten C is left alone.
  DeviceBuffer unwritten(4 * g.c_size());
  g.beta = 1.0f;
  ASSERT_EQ(call(g, nullptr, nullptr, unwritten.get<float>()), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(first_uninitialized(unwritten.get(), 4 * g.c_size()), unwritten.get());
}

TEST_F(CublasTest, ZeroSizesReturnAtOnce) {
  Gemm g;
  g.resolve();
  for (int zero = 0; zero < 3; ++zero) {
    Gemm z = g;
    (zero == 0 ? z.m : zero == 1 ? z.n : z.batch) = 0;
    EXPECT_EQ(call(z, nullptr, nullptr, nullptr), CUBLAS_STATUS_SUCCESS) << zero;
  }
}

TEST_F(CublasTest, EachInvalidArgumentHasItsStatus) {
  Gemm g;
  g.resolve();
  DeviceBuffer da(4 * g.a_size()), db(4 * g.b_size()), dc(4 * g.c_size());
  upload(da.get(), random_values(g.a_size(), 5));
  upload(db.get(), random_values(g.b_size(), 6));
  const float* a = da.get<float>();
  const float* b = db.get<float>();
  float* c = dc.get<float>();
  auto status = [&](const std::function<void(Gemm&)>& change) {
    Gemm bad = g;
    change(bad);
    return call(bad, a, b, c);
  };
  EXPECT_EQ(status([](Gemm& x) { x.ta = static_cast<cublasOperation_t>(3); }),
            CUBLAS_STATUS_INVALID_VALUE);  // CONJG is not a gemm operation
  EXPECT_EQ(status([](Gemm& x) { x.tb = static_cast<cublasOperation_t>(-1); }),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.m = -1; }), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.n = -1; }), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.k = -1; }), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.batch = -1; }), CUBLAS_STATUS_INVALID_VALUE);
  // lda >= max(1, rows of A as stored): m for N, k for T.
  EXPECT_EQ(status([](Gemm& x) { x.lda = x.m - 1; }), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.lda = x.m; }), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(status([](Gemm& x) { x.ta = CUBLAS_OP_T, x.lda = x.k - 1; }),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.ldb = x.k - 1; }), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.tb = CUBLAS_OP_T, x.ldb = x.n - 1; }),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.ldc = x.m - 1; }), CUBLAS_STATUS_INVALID_VALUE);
  // max(1, ...): a zero leading dimension is invalid even for empty matrices.
  EXPECT_EQ(status([](Gemm& x) { x.m = 0, x.lda = 0; }), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(status([](Gemm& x) { x.m = 0, x.lda = 1, x.ldc = 1; }), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(
      cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, nullptr, a, g.lda,
                                g.sa, b, g.ldb, g.sb, &g.beta, c, g.ldc, g.sc, g.batch),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, a,
                                g.lda, g.sa, b, g.ldb, g.sb, nullptr, c, g.ldc, g.sc, g.batch),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(g, a, b, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasSgemmStridedBatched(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, a,
                                g.lda, g.sa, b, g.ldb, g.sb, &g.beta, c, g.ldc, g.sc, g.batch),
      CUBLAS_STATUS_NOT_INITIALIZED);
  cublasHandle_t dead = nullptr;
  ASSERT_EQ(cublasCreate(&dead), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(dead), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(
      cublasSgemmStridedBatched(dead, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, a, g.lda,
                                g.sa, b, g.ldb, g.sb, &g.beta, c, g.ldc, g.sc, g.batch),
      CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(dead), CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_F(CublasTest, HandleCalls) {
  EXPECT_EQ(cublasCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  cublasMath_t mode = CUBLAS_TF32_TENSOR_OP_MATH;
  ASSERT_EQ(cublasGetMathMode(handle_, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  EXPECT_EQ(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(
                                           CUBLAS_TF32_TENSOR_OP_MATH |
                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(4)), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetMathMode(nullptr, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasGetMathMode(handle_, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  cudaStream_t stream = nullptr, got = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetStream(handle_, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, stream);
  EXPECT_EQ(cublasSetStream(nullptr, stream), CUBLAS_STATUS_NOT_INITIALIZED);
  check(Gemm{}, 500);  // runs on the handle's stream
  // The stream dies: the next call's launch fails.
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  Gemm g;
  g.resolve();
  DeviceBuffer da(4 * g.a_size()), db(4 * g.b_size()), dc(4 * g.c_size());
  upload(da.get(), random_values(g.a_size(), 1));
  upload(db.get(), random_values(g.b_size(), 2));
  EXPECT_EQ(call(g, da.get<float>(), db.get<float>(), dc.get<float>()),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cublasSetStream(handle_, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED),
               "the library was not initialized");
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, 7);
  EXPECT_EQ(CUBLAS_STATUS_EXECUTION_FAILED, 13);
  EXPECT_EQ(CUBLAS_STATUS_NOT_SUPPORTED, 15);
}

// The accesses are checked as a kernel's: a fault names the call, the operand, batch and column,
// and leaves C untouched.
class CublasFaultTest : public CublasTest {
 protected:
  void SetUp() override {
    CublasTest::SetUp();
    g_.resolve();
    a_ = std::make_unique<DeviceBuffer>(4 * g_.a_size());
    b_ = std::make_unique<DeviceBuffer>(4 * g_.b_size());
    c_ = std::make_unique<DeviceBuffer>(4 * g_.c_size());
    upload(a_->get(), random_values(g_.a_size(), 11));
    upload(b_->get(), random_values(g_.b_size(), 12));
    upload(c_->get(), std::vector<float>(g_.c_size(), 42.0f));
  }
  void TearDown() override {
    // Whatever faulted, C was not written.
    for (float v : download<float>(c_->get(), g_.c_size())) ASSERT_EQ(v, 42.0f);
    a_.reset();
    b_.reset();
    c_.reset();
    CublasTest::TearDown();
  }
  std::string fault(const Gemm& g, const void* a, const void* b, void* c) {
    return fault_of([&] {
      (void)call(g, static_cast<const float*>(a), static_cast<const float*>(b),
                 static_cast<float*>(c));
    });
  }
  Gemm g_;
  std::unique_ptr<DeviceBuffer> a_, b_, c_;
};

// "simt: <kind> in cublasSgemmStridedBatched: <details>", as the core words a kernel's faults.
std::string expected(const std::string& kind, const std::string& details) {
  return "simt: " + kind + " in cublasSgemmStridedBatched: " + details;
}

TEST_F(CublasFaultTest, ReadingPastAnAllocation) {
  Gemm g = g_;
  g.sa = g_.sa + 2;  // the last column of batch 2 now runs one element past A's end
  const std::string message = fault(g, a_->get(), b_->get(), c_->get());
  EXPECT_NE(
      message.find(expected("out-of-bounds global memory access", "A of batch 2, column 8 (read)")),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("runs 4 bytes past the end of allocation"), std::string::npos) << message;
}

TEST_F(CublasFaultTest, WritingPastAnAllocation) {
  Gemm g = g_;
  g.sc = g_.sc + 5;
  const std::string message = fault(g, a_->get(), b_->get(), c_->get());
  EXPECT_NE(message.find(
                expected("out-of-bounds global memory access", "C of batch 2, column 6 (written)")),
            std::string::npos)
      << message;
}

TEST_F(CublasFaultTest, HostAndNullOperands) {
  std::vector<float> host(g_.a_size(), 1.0f);
  std::string message = fault(g_, host.data(), b_->get(), c_->get());
  EXPECT_NE(
      message.find(expected("out-of-bounds global memory access", "A of batch 0, column 0 (read)")),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("is not device memory"), std::string::npos) << message;
  message = fault(g_, a_->get(), nullptr, c_->get());
  EXPECT_NE(message.find("B of batch 0, column 0 (read): [0x0, +36 bytes) is at a null pointer"),
            std::string::npos)
      << message;
}

TEST_F(CublasFaultTest, ReadingUnwrittenMemory) {
  DeviceBuffer b(4 * g_.b_size());
  std::vector<float> values = random_values(g_.b_size(), 3);
  upload(b.get(), values);
  // Column 4 of batch 1 loses its row 2: never written.
  DeviceBuffer fresh(4 * g_.b_size());
  const size_t hole = g_.sb + 4 * g_.ldb + 2;
  ASSERT_EQ(cudaMemcpy(fresh.get(), values.data(), 4 * hole, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(fresh.get<float>() + hole + 1, values.data() + hole + 1,
                       4 * (values.size() - hole - 1), cudaMemcpyHostToDevice),
            cudaSuccess);
  const std::string message = fault(g_, a_->get(), fresh.get(), c_->get());
  EXPECT_NE(message.find(expected("uninitialised global memory read",
                                  "B of batch 1, element (row 2, column 4)")),
            std::string::npos)
      << message;
  // With beta != 0, C is read too.
  Gemm g = g_;
  g.beta = 0.5f;
  DeviceBuffer unwritten(4 * g.c_size());
  EXPECT_NE(fault(g, a_->get(), b.get(), unwritten.get())
                .find(expected("uninitialised global memory read",
                               "C of batch 0, element (row 0, column 0)")),
            std::string::npos);
}

TEST_F(CublasFaultTest, MisalignedOperand) {
  const std::string message = fault(g_, a_->get<char>() + 2, b_->get(), c_->get());
  EXPECT_NE(message.find(expected("misaligned access", "A at")), std::string::npos) << message;
}

TEST_F(CublasFaultTest, BatchesWritingOneOutput) {
  Gemm g = g_;
  g.sc = 0;  // every batch writes the same C
  std::string message = fault(g, a_->get(), b_->get(), c_->get());
  EXPECT_NE(message.find(expected("data race on global memory",
                                  "C element (row 0, column 0) of batch 1 is also written by "
                                  "another batch")),
            std::string::npos)
      << message;
  g.sc = g_.ldc * (g_.n - 1);  // batch 1's first column is batch 0's last
  message = fault(g, a_->get(), b_->get(), c_->get());
  EXPECT_NE(message.find(
                expected("data race on global memory", "C element (row 0, column 0) of batch 1")),
            std::string::npos)
      << message;
}

TEST_F(CublasFaultTest, AnInputThatIsTheOutput) {
  Gemm g = g_;
  g.batch = 1;
  g.k = g.n;  // A (m x k) fits where C is
  g.lda = g.ldc;
  const std::string message = fault(g, c_->get(), b_->get(), c_->get());
  EXPECT_NE(message.find(expected("data race on global memory",
                                  "A element (row 0, column 0) of batch 0 is an element of C")),
            std::string::npos)
      << message;
}

TEST_F(CublasTest, ADeviceScalarFaultsAsWithTheLibrary) {
  Gemm g;
  g.resolve();
  DeviceBuffer scalar(4), da(4 * g.a_size()), db(4 * g.b_size()), dc(4 * g.c_size());
  const float* alpha = scalar.get<float>();
  EXPECT_EXIT(
      {
        (void)cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, alpha,
                                        da.get<float>(), g.lda, g.sa, db.get<float>(), g.ldb, g.sb,
                                        &g.beta, dc.get<float>(), g.ldc, g.sc, g.batch);
      },
      testing::died_of_segv, testing::kSegvReport);
}

}  // namespace
}  // namespace braid::simt
