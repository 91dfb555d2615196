// The grouped AdamW kernel: bitwise equal to updating one parameter at a time whatever the
// thread count, and to a float64 reference within the fp32 tolerance of the single updates.
#include <omp.h>

#include <cmath>

#include "braid/ops/elementwise.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

// One parameter with its gradient, moments and hyper-parameters.
struct Slot {
  Tensor param, grad, exp_avg, exp_avg_sq;
  ops::AdamWHyper hyper;
};

// Sizes on both sides of the kernel's split threshold (32768 elements): large ones are shared
// between threads, small ones go whole to one thread in turn. Moments start non-zero and the
// steps differ, as after a restore.
std::vector<Slot> make_slots() {
  const int64_t sizes[] = {100003, 7, 40000, 768, 3, 32768, 32769, 1};
  std::vector<Slot> slots;
  uint64_t seed = 100;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const int64_t n = sizes[i];
    Tensor v = randn({n}, seed++, 0.1f);
    v = mul(v, v);  // second moments are non-negative
    slots.push_back({randn({n}, seed++), randn({n}, seed++, 3.0f), randn({n}, seed++, 0.1f), v,
                     ops::AdamWHyper{1e-3f * static_cast<float>(i + 1), 0.9f, 0.95f, 1e-8f,
                                     i % 2 == 0 ? 0.1f : 0.0f, static_cast<int64_t>(i + 1)}});
  }
  return slots;
}

std::vector<Slot> copy_of(const std::vector<Slot>& slots) {
  std::vector<Slot> out;
  for (const Slot& s : slots)
    out.push_back(
        {s.param.clone(), s.grad.clone(), s.exp_avg.clone(), s.exp_avg_sq.clone(), s.hyper});
  return out;
}

void update_as_group(std::vector<Slot>& slots, float grad_scale) {
  std::vector<ops::AdamWUpdate> updates;
  for (Slot& s : slots) updates.push_back({&s.param, &s.grad, &s.exp_avg, &s.exp_avg_sq, s.hyper});
  ops::kernel<ops::AdamWGroupKernel>(Device::cpu())(updates, grad_scale);
}

void update_one_at_a_time(std::vector<Slot>& slots, float grad_scale) {
  for (Slot& s : slots)
    ops::kernel<ops::AdamWKernel>(Device::cpu())(s.param, s.grad, s.exp_avg, s.exp_avg_sq, s.hyper,
                                                 grad_scale);
}

void expect_bitwise_equal(const std::vector<Slot>& a, const std::vector<Slot>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("slot " + std::to_string(i) + " of " + std::to_string(a[i].param.numel()));
    expect_close(a[i].param, to_double(b[i].param), 0, 0);
    expect_close(a[i].exp_avg, to_double(b[i].exp_avg), 0, 0);
    expect_close(a[i].exp_avg_sq, to_double(b[i].exp_avg_sq), 0, 0);
  }
}

// Restores the OpenMP thread count when a test changes it.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(AdamWGroup, EqualsOneUpdateAtATimeBitwiseForAnyThreadCount) {
  const std::vector<Slot> start = make_slots();
  constexpr float kGradScale = 0.37f;  // a clip coefficient
  std::vector<Slot> single = copy_of(start);
  {
    ThreadCount one(1);
    update_one_at_a_time(single, kGradScale);
  }
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    ThreadCount count(threads);
    std::vector<Slot> grouped = copy_of(start);
    update_as_group(grouped, kGradScale);
    expect_bitwise_equal(grouped, single);
    std::vector<Slot> each = copy_of(start);
    update_one_at_a_time(each, kGradScale);
    expect_bitwise_equal(each, single);
  }
}

TEST(AdamWGroup, MatchesFloat64Reference) {
  // Fresh moments, as at a first step: with old ones b1 m and (1 - b1) g can cancel, and the
  // fp32 result then carries an error relative to the terms, not to itself. The steps still
  // differ, so every bias correction is checked.
  std::vector<Slot> start = make_slots();
  for (Slot& s : start) {
    s.exp_avg = Tensor::zeros(s.param.shape());
    s.exp_avg_sq = Tensor::zeros(s.param.shape());
  }
  std::vector<Slot> grouped = copy_of(start);
  constexpr float kGradScale = 0.5f;  // exact in fp32, so the reference's gradient is too
  update_as_group(grouped, kGradScale);
  for (size_t i = 0; i < start.size(); ++i) {
    SCOPED_TRACE("slot " + std::to_string(i));
    const ops::AdamWHyper& h = start[i].hyper;
    std::vector<double> p = to_double(start[i].param), m = to_double(start[i].exp_avg),
                        v = to_double(start[i].exp_avg_sq);
    const std::vector<double> g = to_double(start[i].grad);
    const double bc1 = 1 - std::pow(double{h.beta1}, h.step);
    const double bc2 = 1 - std::pow(double{h.beta2}, h.step);
    for (size_t j = 0; j < p.size(); ++j) {
      const double gj = g[j] * kGradScale;
      p[j] *= 1 - double{h.lr} * h.weight_decay;
      m[j] = h.beta1 * m[j] + (1 - double{h.beta1}) * gj;
      v[j] = h.beta2 * v[j] + (1 - double{h.beta2}) * gj * gj;
      p[j] -= h.lr / bc1 * m[j] / (std::sqrt(v[j]) / std::sqrt(bc2) + h.eps);
    }
    // One fp32 step rounds each value a few times (the tolerance of AdamW.OneStepMatches...).
    expect_close(grouped[i].param, p, 1e-6, 1e-9);
    expect_close(grouped[i].exp_avg, m, 1e-6, 1e-9);
    expect_close(grouped[i].exp_avg_sq, v, 1e-6, 1e-9);
  }
}

}  // namespace
}  // namespace braid::testing
