// Memory plan arithmetic: per-rank parameters against the model braid builds for that rank and
// against closed forms (tp splits the block weights and the vocabulary, pp splits the blocks),
// ZeRO-1's moments shared out over dp, the variants' ordering, grouping, JSON and the check.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "braid/core/byte_count.h"
#include "braid/nn/gpt.h"
#include "braid/nn/tensor_parallel.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/train/memory_plan.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

constexpr int64_t kC = 64, kLayers = 4, kHeads = 4, kBlock = 32, kVocab = 257;

TrainConfig small_config(const std::string& parallel = "", const std::string& extra_model = "",
                         const std::string& extra_training = "") {
  return parse_config(
      fmt::format(R"(
model {{ vocab_size: {} n_layer: {} n_head: {} n_embd: {} block_size: {} {} }}
data {{ train_pattern: "unused_*.bin" tokenizer: "byte" }}
training {{ steps: 2 batch_size: 4 seq_len: 32 {} }}
parallel {{ {} }}
)",
                  kVocab, kLayers, kHeads, kC, kBlock, extra_model, extra_training, parallel),
      "test");
}

// Closed form of one block's parameters on one of `tp` ranks: the four weight matrices (12 C^2)
// and the qkv and fc biases (7 C) split, the LayerNorms (4 C) and the projections' biases (2 C)
// whole.
int64_t block_parameters(int64_t tp) {
  return 12 * kC * kC / tp + 7 * kC / tp + 6 * kC;
}

int64_t padded_vocab(int64_t tp) {
  const int64_t m = std::lcm(int64_t{64}, tp);
  return (kVocab + m - 1) / m * m;
}

TEST(MemoryPlan, SingleProcessCountsMatchTheClosedForm) {
  const MemoryPlan plan = plan_memory(small_config());
  ASSERT_EQ(plan.groups.size(), 1u);
  const RankMemory& r = plan.groups[0];
  EXPECT_EQ(r.ranks, std::vector<int>{0});
  EXPECT_EQ(plan.padded_vocab, 320);
  // Tied embeddings: wte, wpe, the blocks, ln_f.
  const int64_t n = padded_vocab(1) * kC + kBlock * kC + kLayers * block_parameters(1) + 2 * kC;
  EXPECT_EQ(r.parameter_count, n);
  EXPECT_EQ(r.parameters, 4 * n);
  EXPECT_EQ(r.gradients, 4 * n);
  EXPECT_EQ(r.optimizer_state, 8 * n);  // AdamW: two f32 moments
  EXPECT_EQ(r.comm_buffers, 0);
  EXPECT_EQ(r.total, r.parameters + r.gradients + r.optimizer_state + r.activations);
}

// The activations of the CPU step without recompute, from the tensors each op saves: the
// embedding's output, per block 16 NC + 4N + HN, ln_f's output and statistics and the logits
// (whose gradient the fused loss writes over them), then the head's input gradient (NC), plus
// the batch's ids and targets, the position ids and two scalars. (No GEMM here is long enough
// for split_gemm.h to cut its reduction.)
TEST(MemoryPlan, ActivationsOfTheCpuStepMatchTheClosedForm) {
  const MemoryPlan plan = plan_memory(small_config());
  const int64_t n = 4 * 32;
  const int64_t saved =
      n * kC + kLayers * (16 * n * kC + 4 * n + kHeads * n) + n * kC + 2 * n + n * padded_vocab(1);
  const int64_t expect = 4 * (saved + n * kC) + 2 * 4 * n + 4 * 32 + 2 * 4;
  EXPECT_EQ(plan.groups[0].activations, expect);
  ASSERT_EQ(plan.groups[0].variants.size(), 2u);  // tp = 1: recompute off / on only
  EXPECT_TRUE(plan.groups[0].variants[0].configured);
  EXPECT_FALSE(plan.groups[0].variants[1].configured);
  EXPECT_LT(plan.groups[0].variants[1].bytes, plan.groups[0].variants[0].bytes);
}

// A device plan needs no visible device. There the loss is not fused: its logits' gradient is a
// second logits-sized buffer instead of the head's input gradient over the logits.
TEST(MemoryPlan, DevicePlanHoldsTheLogitsGradientApart) {
  TrainConfig config = small_config();
  const MemoryPlan cpu = plan_memory(config);
  set_field(config, "training.device", "cuda");
  const MemoryPlan cuda = plan_memory(config);
  EXPECT_EQ(cuda.device, "cuda");
  EXPECT_EQ(cuda.groups[0].parameters, cpu.groups[0].parameters);
  const int64_t n = 4 * 32;
  EXPECT_EQ(cuda.groups[0].activations - cpu.groups[0].activations,
            4 * (n * padded_vocab(1) - n * kC));
}

TEST(MemoryPlan, TensorParallelHalvesTheBlockWeightsAndTheVocabulary) {
  for (int tp : {2, 4}) {
    const MemoryPlan plan = plan_memory(small_config(fmt::format("tp: {}", tp)));
    ASSERT_EQ(plan.groups.size(), 1u) << "every tp rank holds the same sizes";
    EXPECT_EQ(plan.groups[0].ranks.size(), static_cast<size_t>(tp));
    const int64_t n =
        padded_vocab(tp) / tp * kC + kBlock * kC + kLayers * block_parameters(tp) + 2 * kC;
    EXPECT_EQ(plan.groups[0].parameter_count, n) << "tp=" << tp;
    EXPECT_EQ(plan.groups[0].optimizer_state, 8 * n);
    // Four variants: recompute and sequence parallelism each off and on.
    EXPECT_EQ(plan.groups[0].variants.size(), 4u);
  }
  // tp = 2 halves the split parts exactly.
  const int64_t one = plan_memory(small_config()).groups[0].parameter_count;
  const int64_t two = plan_memory(small_config("tp: 2")).groups[0].parameter_count;
  EXPECT_EQ(one - two,
            (padded_vocab(1) - padded_vocab(2) / 2) * kC + kLayers * (12 * kC * kC + 7 * kC) / 2);
}

// Sequence parallelism keeps NC/tp instead of NC of each replicated region (the residuals, the
// LayerNorm statistics, the block output), but the gathered LayerNorm outputs whole: per block
// 4NC + 12NC/tp + 4N + HN/tp without it, 2NC + 14NC/tp + 4N/tp + HN/tp with it.
TEST(MemoryPlan, SequenceParallelSavesWhatTheClosedFormSays) {
  const MemoryPlan plan = plan_memory(small_config("tp: 2", "", ""));
  const auto& v = plan.groups[0].variants;
  ASSERT_EQ(v.size(), 4u);
  const ActivationVariant& plain = v[0];
  const ActivationVariant& sp = v[1];
  ASSERT_FALSE(plain.recompute);
  ASSERT_FALSE(plain.sequence_parallel);
  ASSERT_TRUE(sp.sequence_parallel);
  EXPECT_LT(sp.bytes, plain.bytes);
  // Both peak at the head (the vocabulary-parallel loss holds the logits and their gradient):
  // the difference is the blocks', the embedding output's, ln_f's statistics' and the
  // position ids' (this rank's piece of the sequence: 32 / tp).
  const double n = 4 * 32, c = kC, t = 2;
  const double block_plain = 4 * n * c + 12 * n * c / t + 4 * n + kHeads * n / t;
  const double block_sp = 2 * n * c + 14 * n * c / t + 4 * n / t + kHeads * n / t;
  const double diff =
      kLayers * (block_plain - block_sp) + (n * c - n * c / t) + (2 * n - 2 * n / t);
  EXPECT_EQ(plain.bytes - sp.bytes, static_cast<int64_t>(4 * diff) + 4 * (32 - 32 / 2));
}

TEST(MemoryPlan, ZeroOneSharesTheMomentsOutOverDp) {
  for (int dp : {2, 3, 4}) {
    const TrainConfig ddp = small_config(fmt::format("dp: {} strategy: \"ddp\"", dp));
    // Small buckets, so the shard is the sum of many per-bucket chunks.
    const TrainConfig zero = small_config(fmt::format(
        "dp: {} strategy: \"zero1\" strategy_options {{ key: \"bucket_mb\" value: \"0.05\" }}",
        dp));
    const MemoryPlan whole = plan_memory(ddp), sharded = plan_memory(zero);
    ASSERT_EQ(whole.groups.size(), 1u);
    const int64_t n = whole.groups[0].parameter_count;
    EXPECT_EQ(whole.groups[0].optimizer_state, 8 * n);
    EXPECT_EQ(whole.groups[0].comm_buffers, 0) << "ddp's buckets are views of the gradients";
    int64_t moments = 0, ranks = 0;
    const int64_t buckets = (n + 13106) / 13107 + 1;  // 0.05 MiB of floats per bucket
    for (int rank = 0; rank < dp; ++rank) {
      const RankMemory& r = sharded.for_rank(rank);
      EXPECT_EQ(r.parameter_count, n);
      EXPECT_EQ(r.gradients, 4 * n);
      moments += r.optimizer_state;
      // The reduce-scatter target is one moment's size: the shard.
      EXPECT_EQ(r.comm_buffers * 2, r.optimizer_state);
      // Each bucket's chunk is its length / dp, rounded either way.
      EXPECT_NEAR(static_cast<double>(r.optimizer_state) / 8, static_cast<double>(n) / dp,
                  static_cast<double>(buckets));
      ++ranks;
    }
    EXPECT_EQ(ranks, dp);
    EXPECT_EQ(moments, 8 * n) << "every element's moments live on exactly one rank, dp=" << dp;
  }
}

TEST(MemoryPlan, PipelineStagesHoldTheirBlocksAndTheTiedEmbeddingCopy) {
  const MemoryPlan plan = plan_memory(small_config("pp: 2 micro_batches: 2"));
  ASSERT_EQ(plan.groups.size(), 2u);
  const RankMemory& first = plan.for_rank(0);
  const RankMemory& last = plan.for_rank(1);
  EXPECT_EQ(first.pp_stage, 0);
  EXPECT_EQ(last.pp_stage, 1);
  const int64_t half = kLayers / 2 * block_parameters(1);
  EXPECT_EQ(first.parameter_count, padded_vocab(1) * kC + kBlock * kC + half);
  EXPECT_EQ(last.parameter_count, padded_vocab(1) * kC + half + 2 * kC);
  // Each stage posts one receive of a micro-batch's residual stream (2 rows x 32 x C).
  EXPECT_EQ(first.comm_buffers, 4 * 2 * 32 * kC);
  EXPECT_EQ(last.comm_buffers, 4 * 2 * 32 * kC);
  EXPECT_EQ(plan.schedule, "1f1b");
}

// The plan's parameter counts are those of the model braid builds for each rank.
TEST(MemoryPlan, ParametersAreThoseOfTheModelBuiltForEachRank) {
  for (const std::string& layout :
       {std::string(""), std::string("tp: 2"), std::string("tp: 4 pp: 2 micro_batches: 2"),
        std::string("pp: 2 virtual_stages: 2 micro_batches: 2"),
        std::string("pp: 2 stage_layers: [3, 1] micro_batches: 2")}) {
    for (const std::string& tie : {std::string(""), std::string("tie_embeddings: false")}) {
      const TrainConfig config = small_config(layout, tie);
      const MemoryPlan plan = plan_memory(config);
      const nn::GptConfig g = gpt_config(config);
      namespace pl = parallel::pipeline;
      const pl::ScheduleShape shape{plan.pp, plan.micro_batches, plan.virtual_stages};
      const auto ranges =
          pl::split_layers(g.n_layer, shape.virtual_stages(),
                           std::vector<int64_t>(config.parallel().stage_layers().begin(),
                                                config.parallel().stage_layers().end()));
      for (int rank = 0; rank < plan.tp * plan.pp * plan.dp; ++rank) {
        const int tp_rank = rank % plan.tp, stage = rank / (plan.tp * plan.dp);
        nn::GptStagePart part;
        part.chunks = pl::stage_chunks(ranges, shape, stage);
        part.embeddings = stage == 0;
        part.head = stage == plan.pp - 1;
        nn::TensorParallelPtr tp =
            plan.tp > 1 ? std::make_shared<nn::LayoutOnlyTensorParallel>(tp_rank, plan.tp)
                        : nullptr;
        const nn::Gpt model(g, tp, part);
        EXPECT_EQ(plan.for_rank(rank).parameter_count, model.num_parameters())
            << "layout '" << layout << "' " << tie << " rank " << rank;
      }
    }
  }
}

TEST(MemoryPlan, RecomputeVariantIsMarkedAndSmaller) {
  const MemoryPlan plan = plan_memory(small_config("", "recompute: true"));
  const auto& v = plan.groups[0].variants;
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].configured);
  EXPECT_TRUE(v[1].configured);
  EXPECT_EQ(plan.groups[0].activations, v[1].bytes);
  EXPECT_LT(v[1].bytes, v[0].bytes);
  const std::string table = memory_plan_table(plan);
  EXPECT_NE(table.find("*recompute on"), std::string::npos) << table;
  EXPECT_NE(table.find("ranks"), std::string::npos);
}

TEST(MemoryPlan, JsonHoldsEveryGroupAndTerm) {
  const MemoryPlan plan = plan_memory(small_config("tp: 2 dp: 2 strategy: \"zero1\""));
  const nlohmann::json j = nlohmann::json::parse(memory_plan_json(plan));
  EXPECT_EQ(j["tp"], 2);
  EXPECT_EQ(j["dp"], 2);
  int64_t ranks = 0;
  for (const auto& g : j["ranks"]) {
    ranks += static_cast<int64_t>(g["ranks"].size());
    EXPECT_EQ(g["total_bytes"].get<int64_t>(),
              g["parameters_bytes"].get<int64_t>() + g["gradients_bytes"].get<int64_t>() +
                  g["optimizer_state_bytes"].get<int64_t>() +
                  g["comm_buffers_bytes"].get<int64_t>() +
                  std::max(g["activations_bytes"].get<int64_t>(),
                           g["update_copies_bytes"].get<int64_t>()));
    EXPECT_EQ(g["activation_variants"].size(), 4u);
  }
  EXPECT_EQ(ranks, 4);
  EXPECT_EQ(j["max_total_bytes"].get<int64_t>(), plan.max_total());
}

TEST(MemoryPlan, CheckPassesWhatFitsAndNamesWhatWouldHelp) {
  const MemoryPlan plan = plan_memory(small_config("tp: 2 dp: 2"));
  const RankMemory& r = plan.for_rank(0);
  EXPECT_EQ(memory_check_problem(plan, r, 0, r.total, 1, "host memory"), "");
  EXPECT_EQ(memory_check_problem(plan, r, r.total / 2, r.total - r.total / 2, 1, "host memory"),
            "");
  const std::string tight = memory_check_problem(plan, r, 0, r.total - 1, 1, "cuda:0");
  EXPECT_NE(tight.find(format_bytes(r.total)), std::string::npos) << tight;
  EXPECT_NE(tight.find("cuda:0"), std::string::npos);
  EXPECT_NE(tight.find("training.batch_size"), std::string::npos);
  EXPECT_NE(tight.find("model.recompute: true"), std::string::npos);
  EXPECT_NE(tight.find("parallel.sequence_parallel: true"), std::string::npos);
  EXPECT_NE(tight.find("zero1"), std::string::npos);
  EXPECT_NE(tight.find(kSkipMemoryCheckEnv), std::string::npos);
  // Two ranks on one machine need twice the room.
  EXPECT_NE(memory_check_problem(plan, r, 0, r.total, 2, "host memory"), "");
}

TEST(MemoryPlan, StartCheckSkipsWhenAskedAndStopsAnImpossibleRun) {
  // A 10^5-wide model cannot fit any test machine's memory.
  TrainConfig huge = small_config();
  set_field(huge, "model.n_embd", "65536");
  set_field(huge, "model.n_head", "1");
  const auto none = [](const char*) -> const char* { return nullptr; };
  const auto skip = [](const char* name) -> const char* {
    return std::string(name) == kSkipMemoryCheckEnv ? "1" : nullptr;
  };
  if (host_available_bytes() < 0) GTEST_SKIP() << "no /proc/meminfo here";
  const std::string problem = start_of_run_memory_problem(huge, 0, Device::cpu(), none);
  EXPECT_NE(problem.find("MemAvailable"), std::string::npos) << problem;
  EXPECT_EQ(start_of_run_memory_problem(huge, 0, Device::cpu(), skip), "");
  EXPECT_EQ(start_of_run_memory_problem(small_config(), 0, Device::cpu(), none), "");
}

// The Trainer checks before it builds the model: a run that cannot fit stops with the plan's
// line, not with an allocation failure (nor by faulting in terabytes of zeros).
TEST(MemoryPlan, TrainerStopsBeforeBuildingAModelThatCannotFit) {
  if (host_available_bytes() < 0) GTEST_SKIP() << "no /proc/meminfo here";
  if (const char* skip = std::getenv(kSkipMemoryCheckEnv); skip && std::string(skip) == "1")
    GTEST_SKIP() << kSkipMemoryCheckEnv << "=1 turns the check off";
  TrainConfig huge = small_config();
  set_field(huge, "model.n_embd", "65536");
  set_field(huge, "model.n_head", "1");
  try {
    Trainer trainer(huge);
    FAIL() << "a run needing terabytes started";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the memory plan needs"), std::string::npos) << what;
    EXPECT_NE(what.find("host memory (MemAvailable)"), std::string::npos) << what;
  }
}

TEST(MemoryPlan, RanksWithEqualPlansShareOneGroup) {
  const MemoryPlan plan = plan_memory(small_config("tp: 2 pp: 2 dp: 2 micro_batches: 2"));
  size_t ranks = 0;
  for (const RankMemory& g : plan.groups) ranks += g.ranks.size();
  EXPECT_EQ(ranks, 8u);
  EXPECT_EQ(plan.groups.size(), 2u);  // the two stages; tp and dp ranks alike within each
  EXPECT_EQ(plan.for_rank(0).ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(memory_plan_table(plan).find("0-3"), std::string::npos);
}

}  // namespace
}  // namespace braid::train
