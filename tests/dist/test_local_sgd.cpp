// The strategy seam proved from outside: examples/custom_strategy's local SGD, registered by
// this test binary, equals data parallelism at period 1 with plain SGD and still lowers the
// loss with a longer period.
#include <filesystem>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/train/trainer.h"
#include "dist_test.h"
#include "local_sgd.h"

namespace braid::dist::testing {
namespace {

namespace fs = std::filesystem;

class LocalSgdTest : public DistTest {
 protected:
  static void SetUpTestSuite() {
    static bool registered = false;
    if (!registered) local_sgd::register_local_sgd();
    registered = true;
  }
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_lsgd_" + std::to_string(::getpid()) + "_" + std::to_string(rank()));
    fs::create_directories(dir_);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 8000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 5 % 11)));
    data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
  }
  void TearDown() override {
    fs::remove_all(dir_);
    DistTest::TearDown();
  }
  std::vector<float> losses(const std::string& strategy, int period, int steps) const {
    const std::string text = fmt::format(R"(
model {{ vocab_size: 257 n_layer: 1 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "sgd" lr: 0.5 momentum: 0 weight_decay: 0 grad_clip: 0 warmup_steps: 0 schedule: "constant" }}
training {{ steps: {} batch_size: 4 seq_len: 16 val_every: 0 seed: 5 }}
parallel {{ dp: {} strategy: "{}" }}
)",
                                         dir_.string(), steps, size(), strategy);
    train::TrainConfig config = train::parse_config(text, "test");
    if (strategy == "local_sgd")
      train::set_field(config, "parallel.strategy_options.period", std::to_string(period));
    train::Trainer trainer(std::move(config), world_ptr());
    std::vector<float> out;
    for (int i = 0; i < steps; ++i) out.push_back(trainer.train_step().loss);
    return out;
  }
  fs::path dir_;
};

TEST_F(LocalSgdTest, PeriodOneWithPlainSgdEqualsDataParallel) {
  const std::vector<float> ddp = losses("ddp", 1, 10);
  const std::vector<float> local = losses("local_sgd", 1, 10);
  for (size_t i = 0; i < ddp.size(); ++i)
    EXPECT_LE(std::fabs(local[i] - ddp[i]), 1e-5 * std::fabs(ddp[i])) << "step " << i;
}

TEST_F(LocalSgdTest, LongerPeriodStillLowersTheLoss) {
  const std::vector<float> l = losses("local_sgd", 4, 40);
  EXPECT_LT(l.back(), 0.6f * l.front()) << l.front() << " -> " << l.back();
}

TEST_F(LocalSgdTest, UnknownOptionIsRejected) {
  train::TrainConfig config = train::parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 1 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
training {{ steps: 2 batch_size: 4 seq_len: 16 }}
parallel {{ dp: {} strategy: "local_sgd" strategy_options {{ key: "perod" value: "2" }} }}
)",
                                                              dir_.string(), size()),
                                                  "test");
  EXPECT_THROW(train::Trainer(std::move(config), world_ptr()), Error);
}

}  // namespace
}  // namespace braid::dist::testing
