// GemmPairKernel, a linear layer's two gradient products at once: against float64 (also with a
// product that split_gemm.h cuts), bitwise the same on one and two threads, and errors from
// either product reaching the caller.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

void gemm_pair(const ops::GemmProduct& first, const ops::GemmProduct& second) {
  ops::KernelRegistry::instance().get<ops::GemmPairKernel>(DeviceKind::cpu)(first, second);
}

// A linear layer's backward at `rows` tokens: dX = dY W into NaN (beta 0) and the weight
// gradient dY^T X added onto an earlier one (beta 1).
struct LinearBackward {
  Tensor dy, w, x, dx, dw;
  std::vector<double> dw_before;

  LinearBackward(int64_t rows, int64_t in, int64_t out, uint64_t seed)
      : dy(randn({rows, out}, seed)),
        w(randn({out, in}, seed + 1)),
        x(randn({rows, in}, seed + 2)),
        dx(Tensor::full({rows, in}, std::numeric_limits<float>::quiet_NaN())),
        dw(randn({out, in}, seed + 3)),
        dw_before(to_double(dw)) {}

  void run() {
    gemm_pair({&dy, false, &w, false, 1.0f, 0.0f, &dx}, {&dy, true, &x, false, 1.0f, 1.0f, &dw});
  }
};

TEST(GemmPair, ALinearLayersGradientsMatchFloat64) {
  struct Case {
    const char* name;
    int64_t rows, in, out;
  };
  // The second's weight gradient has 16400 rows, which split_gemm.h cuts: the pair then runs
  // its products in turn.
  for (const Case c : {Case{"block-like", 64, 96, 160}, Case{"vocabulary-sized", 8, 24, 16400}}) {
    SCOPED_TRACE(c.name);
    LinearBackward layer(c.rows, c.in, c.out, 40);
    layer.run();
    const std::vector<double> dy = to_double(layer.dy), w = to_double(layer.w);
    const std::vector<double> x = to_double(layer.x);
    const std::vector<double> dx_ref =
        matmul_ref(1, c.rows, c.out, c.in, dense(dy, c.rows, c.out), dense(w, c.out, c.in));
    std::vector<double> dw_ref =
        matmul_ref(1, c.out, c.rows, c.in, transposed(dy, c.out, c.rows), dense(x, c.rows, c.in));
    for (size_t i = 0; i < dw_ref.size(); ++i) dw_ref[i] += layer.dw_before[i];
    // A K-term fp32 sum of N(0, 1) products rounds off by ~2^-24 K at most in practice; twice
    // that, and no less than 1e-4. dX sums over `out`, dW over `rows`.
    auto atol = [](int64_t k) { return std::max(1e-4, 2.0 * std::ldexp(1.0, -24) * k); };
    expect_close(layer.dx, dx_ref, 1e-5, atol(c.out));
    expect_close(layer.dw, dw_ref, 1e-5, atol(c.rows));
  }
}

// Each product runs whole on one thread in either case, so the bits agree.
TEST(GemmPair, BitwiseTheSameOnOneAndTwoThreads) {
  const int saved_threads = omp_get_max_threads();
  std::vector<std::vector<double>> results;
  for (const int threads : {1, 2, 2}) {
    omp_set_num_threads(threads);
    LinearBackward layer(96, 128, 192, 50);
    layer.run();
    std::vector<double> both = to_double(layer.dx);
    const std::vector<double> dw = to_double(layer.dw);
    both.insert(both.end(), dw.begin(), dw.end());
    results.push_back(std::move(both));
  }
  omp_set_num_threads(saved_threads);
  for (size_t r = 1; r < results.size(); ++r)
    EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), results[0].size() * 8), 0)
        << "run " << r << " differs from the 1-thread run";
}

TEST(GemmPair, AShapeErrorInEitherProductReachesTheCaller) {
  LinearBackward layer(16, 24, 32, 60);
  Tensor wrong = Tensor::empty({5, 7});
  EXPECT_ERROR_CONTAINS(gemm_pair({&layer.dy, false, &layer.w, false, 1.0f, 0.0f, &layer.dx},
                                  {&layer.dy, true, &layer.x, false, 1.0f, 0.0f, &wrong}),
                        "gemm shapes do not chain");
  EXPECT_ERROR_CONTAINS(gemm_pair({&layer.dy, false, &layer.w, false, 1.0f, 0.0f, &wrong},
                                  {&layer.dy, true, &layer.x, false, 1.0f, 0.0f, &layer.dw}),
                        "gemm shapes do not chain");
}

}  // namespace
}  // namespace braid::testing
