// zero_grad's deferred fill: stale gradients read as zeros, are overwritten by the next
// backward GEMM, never leak into a gradient, and shared (bucket) storage is zeroed at once.
#include <cmath>
#include <limits>

#include "braid/autograd/node.h"
#include "braid/ops.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A little model: the weight `w` serves both a linear layer (its gradient written by a GEMM)
// and an embedding lookup (rows added in place), like GPT's tied token embedding; `unused`
// takes no part in the loss.
struct Tiny {
  Tensor w = randn({6, 4}, 1).set_requires_grad(true);
  Tensor b = randn({6}, 2).set_requires_grad(true);
  Tensor unused = randn({3}, 3).set_requires_grad(true);

  void backward(uint64_t seed) const {
    Tensor x = randn({5, 4}, seed);
    Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 2, 2, 5}, {4});
    Tensor loss = add(sum(mul(linear(x, w, b), linear(x, w, b))), sum(embedding(w, ids)));
    loss.backward();
  }
};

bool stale(const Tensor& t) {
  return t.impl()->autograd != nullptr && t.impl()->autograd->grad_stale;
}

bool any_nan(const Tensor& t) {
  for (float v : t.to_vector())
    if (std::isnan(v)) return true;
  return false;
}

// Gradients after zero_grad equal those of a first backward into no .grad at all, though the
// stale buffers held NaN: the GEMM overwrote them and everything else read zeros first.
TEST(ZeroGrad, StaleGradientsNeverLeakIntoTheNextBackward) {
  Tiny fresh;
  fresh.backward(10);
  Tiny reused;
  reused.backward(11);
  for (Tensor* p : {&reused.w, &reused.b}) p->grad().fill_(kNaN);
  autograd::zero_grad(reused.w);
  autograd::zero_grad(reused.b);
  EXPECT_TRUE(stale(reused.w));
  EXPECT_TRUE(any_nan(reused.w.impl()->autograd->grad)) << "the fill was deferred, not done";
  reused.backward(10);
  EXPECT_FALSE(stale(reused.w));
  expect_close(reused.w.grad(), fresh.w.grad(), 0, 0);
  expect_close(reused.b.grad(), fresh.b.grad(), 0, 0);
}

// A read before the next backward, or of a parameter the backward never reached, sees zeros.
TEST(ZeroGrad, ReadsBeforeAnyWriteSeeZeros) {
  Tiny t;
  t.backward(12);
  t.unused.set_grad(Tensor::full({3}, kNaN));
  for (Tensor* p : {&t.w, &t.b, &t.unused}) {
    p->grad().fill_(kNaN);
    autograd::zero_grad(*p);
  }
  expect_close(t.b.grad(), std::vector<double>(6, 0.0), 0, 0);
  EXPECT_FALSE(stale(t.b));
  t.backward(13);
  expect_close(t.unused.grad(), std::vector<double>(3, 0.0), 0, 0);
}

// Two backward passes after one zero_grad sum their gradients: only the first overwrites.
TEST(ZeroGrad, MicroBatchesAfterOneZeroGradAccumulate) {
  Tiny once, twice;
  once.backward(14);
  twice.backward(15);
  twice.w.grad().fill_(kNaN);
  autograd::zero_grad(twice.w);
  twice.backward(14);
  twice.backward(14);
  std::vector<double> expected = to_double(once.w.grad());
  for (double& v : expected) v *= 2;
  expect_close(twice.w.grad(), expected, 1e-6, 1e-6);
}

// A gradient that is a view into a shared buffer (a data-parallel bucket, which collectives
// read whole) is zeroed at once: the buffer reads zeros without anyone calling grad().
TEST(ZeroGrad, SharedStorageIsZeroedAtOnce) {
  Tensor bucket = Tensor::full({10}, kNaN);
  Tensor p = randn({4}, 16).set_requires_grad(true);
  p.set_grad(bucket.narrow(0, 3, 4));
  autograd::zero_grad(p);
  EXPECT_FALSE(stale(p));
  const std::vector<float> values = bucket.to_vector();
  for (int i = 3; i < 7; ++i) EXPECT_EQ(values[i], 0.0f) << i;
  EXPECT_TRUE(std::isnan(values[0]));
}

// A handle to the .grad kept across zero_grad reads zeros too: the fill is not deferred then.
TEST(ZeroGrad, AHeldHandleSeesZerosAtOnce) {
  Tiny t;
  t.backward(17);
  Tensor held = t.w.grad();
  held.fill_(kNaN);
  autograd::zero_grad(t.w);
  EXPECT_FALSE(stale(t.w));
  expect_close(held, std::vector<double>(24, 0.0), 0, 0);
}

}  // namespace
}  // namespace braid::testing
