// Tensor-parallel layers on the emulated device, their region collectives going through an
// NcclProcessGroup (stand-in transport), against their unsharded twins on the CPU fed the same
// input: outputs and input, weight and bias gradients within fp32 round-off (1e-5 of their
// scale), sequence parallelism off and on, tp = the world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "braid/autograd/grad_mode.h"
#include "braid/nn/gpt.h"
#include "braid/nn/init.h"
#include "braid/ops.h"
#include "braid/parallel/tensor_parallel.h"
#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

using nn::ShardSpec;

Tensor randn_cpu(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  nn::init::normal_(t, seed, "input", 1.0f, ShardSpec::whole(shape));
  return t;
}

// fp32 results of the same math in another summation order: 1e-5 of the tensor's scale.
void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<float> a = actual.to(Device::cpu()).contiguous().to_vector();
  const std::vector<float> e = expected.contiguous().to_vector();
  double scale = 0, worst = 0;
  size_t at = 0;
  for (float v : e) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < e.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - e[i]);
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, 1e-5 * std::max(scale, 1e-6))
      << what << ": worst element " << at << " is " << a[at] << " vs " << e[at];
}

void init_like_twin(nn::Module& module, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  const auto shards = module.shard_specs();
  for (auto& [name, p] : module.named_parameters()) {
    Tensor t = p.detach();
    nn::init::normal_(t, seed, name, 0.3f, shards.at(name));
  }
}

Tensor leaf(const Tensor& values) {
  Tensor t = values.clone();
  t.set_requires_grad(true);
  return t;
}

class TensorParallelDevice : public DistTest {
 protected:
  static void SetUpTestSuite() {
    cuda::ensure_registered();
    group_ = NcclProcessGroup::create(environment().world(), 0, "tp");
  }
  static void TearDownTestSuite() { group_.reset(); }

  Tensor piece(const Tensor& t, int dim) const {
    return ShardSpec::split(t.shape(), dim, size(), rank()).slice(t);
  }

  static std::shared_ptr<NcclProcessGroup> group_;
};

std::shared_ptr<NcclProcessGroup> TensorParallelDevice::group_;

// A column-parallel layer, GELU, a row-parallel layer: the MLP of a block, whose ends see
// whole tensors (or sequence pieces under sequence parallelism).
TEST_F(TensorParallelDevice, ParallelMlpOnTheDeviceMatchesTheCpuTwin) {
  const int64_t b = 2, t = 4, width = 8;
  const Device gpu = Device::cuda(0);
  for (bool sp : {false, true}) {
    auto tp = std::make_shared<parallel::TensorParallelGroup>(group_, sp);
    nn::ColumnParallelLinear twin_in(width, 4 * width, nullptr), shard_in(width, 4 * width, tp);
    nn::RowParallelLinear twin_out(4 * width, width, nullptr), shard_out(4 * width, width, tp);
    init_like_twin(twin_in, 31);
    init_like_twin(shard_in, 31);
    init_like_twin(twin_out, 32);
    init_like_twin(shard_out, 32);
    shard_in.to(gpu);
    shard_out.to(gpu);
    auto seq = [&](const Tensor& x) { return sp ? piece(x, 1) : x; };
    const Tensor x = randn_cpu({b, t, width}, 33);
    Tensor x_twin = leaf(x);
    Tensor x_shard = leaf(seq(x).contiguous().to(gpu));
    const Tensor y_twin = twin_out.forward(gelu(twin_in.forward(x_twin)));
    const Tensor y = shard_out.forward(gelu(shard_in.forward(x_shard)));
    ASSERT_EQ(y.device(), gpu);
    const Tensor weights = randn_cpu(y_twin.shape(), 34);
    expect_close(y, seq(y_twin), fmt::format("output, sp={}", sp));
    sum(mul(y_twin, weights)).backward();
    sum(mul(y, seq(weights).contiguous().to(gpu))).backward();
    expect_close(x_shard.grad(), seq(x_twin.grad()), fmt::format("input grad, sp={}", sp));
    for (auto [shard, twin] : {std::pair<nn::Module*, nn::Module*>{&shard_in, &twin_in},
                               std::pair<nn::Module*, nn::Module*>{&shard_out, &twin_out}}) {
      const auto twin_params = twin->state_dict();
      const auto specs = shard->shard_specs();
      for (const auto& [name, p] : shard->named_parameters()) {
        ASSERT_TRUE(p.grad().defined()) << name;
        expect_close(p.grad(), specs.at(name).slice(twin_params.at(name).grad()),
                     fmt::format("grad {}, sp={}", name, sp));
      }
    }
  }
}

}  // namespace
}  // namespace braid::dist::testing
