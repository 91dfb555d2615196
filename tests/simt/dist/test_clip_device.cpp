// Gradient clipping on the emulated device over a tp=2 grid (stand-in transport): the norm of
// the two ranks' pieces equals the whole model's, replicated parameters counted once; and the
// norm's two kernels against their CPU twins.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "braid/dist/parallel_grid.h"
#include "braid/nn/gpt.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/optim/clip.h"
#include "braid/optim/optimizer.h"
#include "braid/parallel/data_parallel.h"
#include "braid/parallel/tensor_parallel.h"
#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"
#include "dist_test.h"
#include "training_equivalence.h"

namespace braid::dist::testing {
namespace {

nn::GptConfig tiny_gpt() {
  nn::GptConfig c;
  c.vocab_size = 61;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  return c;
}

class ClipDevice : public DistTest {
 protected:
  static void SetUpTestSuite() { cuda::ensure_registered(); }
};

TEST_F(ClipDevice, TensorParallelNormEqualsTheWholeModelsNorm) {
  if (size() != 2) GTEST_SKIP() << "a tp=2 grid needs 2 ranks";
  const Device device = Device::cuda(0);
  ParallelGrid grid(world_ptr(), ParallelGrid::default_axes(2, 1, 1, 1), device,
                    nccl_group_factory(0));
  nn::Gpt whole(tiny_gpt());
  nn::Gpt piece(tiny_gpt(), std::make_shared<parallel::TensorParallelGroup>(
                                grid.group_for("tp", device), /*sequence_parallel=*/true));
  piece.to(device);
  const std::map<std::string, nn::ShardSpec> shards = piece.shard_specs();
  nn::NamedTensors pieces = piece.named_parameters();
  // A gradient for every parameter of the whole model, its squares summed in float64; each rank
  // gets its slice of it (replicated parameters whole, the same on both ranks).
  double squares = 0;
  int sharded = 0, replicated = 0;
  for (const auto& [name, p] : whole.named_parameters()) {
    std::vector<float> values(static_cast<size_t>(p.numel()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = 0.05f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(name.size()));
      squares += static_cast<double>(values[i]) * values[i];
    }
    const Tensor g = Tensor::from_vector(values, p.shape());
    const nn::ShardSpec& shard = shards.at(name);
    ++(shard.is_whole() ? replicated : sharded);
    Tensor local = slice_of_reference(g, shard).contiguous().to(device);
    for (auto& [local_name, q] : pieces)
      if (local_name == name) q.set_grad(local);
  }
  ASSERT_GT(sharded, 0);
  ASSERT_GT(replicated, 0);
  optim::Sgd sgd(optim::decay_groups(pieces, 0.0f), 0.0f);
  parallel::SingleProcess strategy;
  strategy.setup(piece, sgd, grid);
  const double norm = std::sqrt(squares);
  const float max_norm = static_cast<float>(0.5 * norm);  // so the scale is below 1
  const optim::ClipResult clip = strategy.clip(max_norm);
  ASSERT_TRUE(clip.device.defined());
  const std::vector<float> got = clip.device.to(Device::cpu()).to_vector();
  const optim::ClipResult want = optim::clip_for_norm(norm, max_norm);
  // The squares travel as f32 (one rounding each), the norm and scale are f32.
  EXPECT_NEAR(got[0], norm, 1e-6 * norm);
  EXPECT_NEAR(got[1], want.scale, 1e-6 * want.scale);
  EXPECT_LT(want.scale, 1.0f);
}

// The two parts on one device against their CPU twins and against GradNormKernel in one go.
TEST_F(ClipDevice, SquaresKernelsMatchTheirCpuTwins) {
  const Device device = Device::cuda(0);
  std::vector<Tensor> cpu_grads, gpu_grads;
  for (int i = 0; i < 37; ++i) {  // over the 32 tensors of one launch, an empty one, a big one
    const int64_t n = i == 5 ? 0 : (i == 9 ? 40000 : 1 + 13 * i);
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) values[j] = 0.5f * std::sin(0.11f * j + i);
    cpu_grads.push_back(Tensor::from_vector(values, {n}));
    gpu_grads.push_back(cpu_grads.back().to(device));
  }
  Tensor cpu_squares = Tensor::empty({1}), gpu_squares = Tensor::empty({1}, DType::f32, device);
  ops::kernel<ops::GradSquaresKernel>(Device::cpu())(cpu_grads, cpu_squares);
  ops::kernel<ops::GradSquaresKernel>(device)(gpu_grads, gpu_squares);
  const float want = cpu_squares.item();
  // Both sum in double (the CPU over fp32 blocks of 256), each rounds once to f32.
  EXPECT_NEAR(gpu_squares.to(Device::cpu()).item(), want, 2e-6 * want);
  for (float max_norm : {0.0f, 1.0f, 1e9f}) {
    // Squares {s, 0} give GradNormKernel's answer on the same gradients.
    Tensor pair = Tensor::zeros({2}, DType::f32, device);
    pair.narrow(0, 0, 1).copy_(gpu_squares);
    Tensor from_squares = Tensor::empty({2}, DType::f32, device);
    Tensor in_one_go = Tensor::empty({2}, DType::f32, device);
    ops::kernel<ops::ClipFromSquaresKernel>(device)(pair, max_norm, from_squares);
    ops::kernel<ops::GradNormKernel>(device)(gpu_grads, max_norm, in_one_go);
    const std::vector<float> a = from_squares.to(Device::cpu()).to_vector();
    const std::vector<float> b = in_one_go.to(Device::cpu()).to_vector();
    EXPECT_NEAR(a[0], b[0], 1e-6 * b[0]) << max_norm;
    EXPECT_NEAR(a[1], b[1], 1e-6 * b[1]) << max_norm;
    Tensor cpu_clip = Tensor::empty({2});
    ops::kernel<ops::ClipFromSquaresKernel>(Device::cpu())(pair.to(Device::cpu()), max_norm,
                                                           cpu_clip);
    EXPECT_EQ(cpu_clip.to_vector(), a) << max_norm;  // the same double arithmetic
  }
  Tensor bad = Tensor::from_vector(std::vector<float>{NAN, 1.0f}, {2}).to(device);
  Tensor clip = Tensor::empty({2}, DType::f32, device);
  ops::kernel<ops::ClipFromSquaresKernel>(device)(bad, 1.0f, clip);
  const std::vector<float> c = clip.to(Device::cpu()).to_vector();
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_EQ(c[1], 1.0f);
}

}  // namespace
}  // namespace braid::dist::testing
