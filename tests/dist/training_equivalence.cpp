// Training runs recorded and compared against single-process training.
#include "training_equivalence.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "braid/data/token_shard.h"

namespace braid::dist::testing {

namespace fs = std::filesystem;

fs::path write_corpus(const std::string& prefix, int rank) {
  const fs::path dir = fs::temp_directory_path() /
                       (prefix + std::to_string(::getpid()) + "_" + std::to_string(rank));
  fs::create_directories(dir);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 8000; ++i) tokens.push_back(static_cast<int32_t>(32 + (i * 31 + i / 7) % 90));
  data::write_token_shard(dir / "train_000.bin", std::span<const int32_t>(tokens));
  return dir;
}

TrainingRun train(train::TrainConfig config, ProcessGroupPtr world, int steps) {
  train::Trainer trainer(std::move(config), std::move(world));
  TrainingRun run;
  for (int i = 0; i < steps; ++i) {
    run.losses.push_back(trainer.train_step().loss);
    if (i > 0) continue;
    for (const auto& [name, p] : trainer.model().named_parameters())
      if (p.grad().defined()) run.first_grads[name] = p.grad().clone();
  }
  for (const auto& [name, p] : trainer.model().named_parameters()) run.params[name] = p.clone();
  run.shards = trainer.model().shard_specs();
  return run;
}

Tensor slice_of_reference(const Tensor& reference, const nn::ShardSpec& shard) {
  if (reference.shape() == shard.local_shape && shard.is_whole()) return reference;
  Tensor whole = reference;
  if (reference.shape() != shard.global_shape) {
    whole = Tensor::zeros(shard.global_shape);
    whole.narrow(0, 0, reference.size(0)).copy_(reference);
  }
  return shard.slice(whole);
}

void expect_same_losses(const TrainingRun& actual, const TrainingRun& expected,
                        const std::string& what) {
  ASSERT_EQ(actual.losses.size(), expected.losses.size());
  for (size_t i = 0; i < actual.losses.size(); ++i)
    EXPECT_LE(std::fabs(actual.losses[i] - expected.losses[i]),
              1e-5 * std::fabs(expected.losses[i]))
        << what << " step " << i << ": " << actual.losses[i] << " vs " << expected.losses[i];
}

void expect_same_first_gradients(const TrainingRun& actual, const TrainingRun& expected,
                                 const std::string& what) {
  // A pipeline stage holds some of the parameters; together the stages hold all of them.
  ASSERT_EQ(actual.first_grads.size(), actual.params.size())
      << what << ": a parameter got no gradient";
  for (const auto& [name, local] : actual.first_grads) {
    ASSERT_TRUE(expected.first_grads.count(name)) << what << ": unexpected parameter " << name;
    const Tensor& reference = expected.first_grads.at(name);
    const std::vector<float> got = local.to_vector();
    const std::vector<float> want =
        slice_of_reference(reference, actual.shards.at(name)).to_vector();
    ASSERT_EQ(got.size(), want.size()) << what << " " << name;
    double scale = 0, diff = 0;
    for (float v : reference.to_vector())
      scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (size_t i = 0; i < want.size(); ++i)
      diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    EXPECT_LE(diff, 1e-5 * scale) << what << " step-1 gradient of " << name;
  }
}

void expect_same_training(const TrainingRun& actual, const TrainingRun& expected,
                          const std::string& what, double learning_rate) {
  expect_same_losses(actual, expected, what);
  const double adam_bound = learning_rate * static_cast<double>(actual.losses.size());
  ASSERT_EQ(actual.params.size(), expected.params.size()) << what;
  for (const auto& [name, local] : actual.params) {
    // The same slice of the expected parameter (whole when neither run shards it).
    const nn::ShardSpec& shard = actual.shards.at(name);
    const Tensor& reference = expected.params.at(name);
    const std::vector<float> got = local.to_vector();
    const std::vector<float> want = slice_of_reference(reference, shard).to_vector();
    ASSERT_EQ(got.size(), want.size()) << what << " " << name;
    const bool qkv_bias = name.find("attn.qkv.bias") != std::string::npos;
    const size_t width = want.size() / 3;
    double diff = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = std::fabs(got[i] - want[i]);
      if (qkv_bias && i >= width && i < 2 * width) {
        EXPECT_LE(d, adam_bound) << what << " " << name << "[" << i << "] (key bias)";
        continue;
      }
      diff = std::max(diff, d);
      scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    }
    EXPECT_LE(diff, 1e-5 * std::max(scale, 1.0)) << what << " parameter " << name;
  }
}

}  // namespace braid::dist::testing
