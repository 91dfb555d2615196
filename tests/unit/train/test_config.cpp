// Tests for the training config: loading, defaults, validation messages, overrides, round trip.
#include "braid/train/config.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/train/device_placement.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

std::string example_config(const std::string& name) {
#ifdef BRAID_FIXTURE_DIR
  const fs::path root = fs::path(BRAID_FIXTURE_DIR).parent_path().parent_path();
#else
  const fs::path root = fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
#endif
  return (root / "examples" / "gpt" / "configs" / name).string();
}

// The message of the braid::Error that `fn` throws; fails the test when nothing is thrown.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected braid::Error, nothing was thrown";
  return "";
}

// A valid config whose lines the rule tests edit; each field sits on its own line.
const char* const kBase = R"(model {
  n_layer: 4
  n_head: 4
  n_embd: 256
  block_size: 128
  vocab_size: 50257
}
data {
  train_pattern: "train_*.bin"
  tokenizer: "gpt2"
}
optimizer {
  name: "adamw"
  lr: 1e-3
  min_lr: 1e-4
  beta1: 0.9
  beta2: 0.95
  eps: 1e-8
  warmup_steps: 20
  schedule: "cosine"
}
training {
  steps: 200
  batch_size: 8
  seq_len: 128
  grad_accum_steps: 1
}
sample {
  temperature: 0.8
  top_k: 40
}
parallel {
  tp: 1
  pp: 1
  dp: 1
}
)";

// 1-based line of the first line of `text` containing `needle`; 0 when absent.
int line_of(const std::string& text, const std::string& needle) {
  int line = 1;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('\n', start);
    if (text.substr(start, end - start).find(needle) != std::string::npos) return line;
    if (end == std::string::npos) break;
    start = end + 1;
    ++line;
  }
  return 0;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << "base config has no \"" << from << "\"";
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

TEST(Config, TinyLoadsAndValidates) {
  const TrainConfig cfg = load_config(example_config("tiny.textproto"));
  EXPECT_NO_THROW(validate(cfg));
  EXPECT_EQ(cfg.model().n_layer(), 4);
  EXPECT_EQ(cfg.model().n_head(), 4);
  EXPECT_EQ(cfg.model().n_embd(), 256);
  EXPECT_EQ(cfg.model().block_size(), 128);
  EXPECT_EQ(cfg.training().seq_len(), 128);
  EXPECT_EQ(cfg.data().tokenizer(), "gpt2");
  EXPECT_EQ(cfg.data().train_pattern(), "data/kjv/kjv_train_*.bin");
  EXPECT_DOUBLE_EQ(cfg.optimizer().lr(), 1e-3);
  EXPECT_DOUBLE_EQ(cfg.optimizer().min_lr(), 1e-4);
  EXPECT_EQ(cfg.sample().prompt(), "And God said");
  EXPECT_EQ(cfg.sample().tokens(), 64);
  // Locations are recorded for validation messages: n_layer sits on line 4 of tiny.textproto.
  EXPECT_EQ(cfg.field_lines.at("model.n_layer"), 4);
  EXPECT_EQ(cfg.origin("model.n_layer"), cfg.source + ":4");
}

TEST(Config, Gpt2SmallLoadsAndValidates) {
  const TrainConfig cfg = load_config(example_config("gpt2_124m.textproto"));
  EXPECT_NO_THROW(validate(cfg));
  EXPECT_EQ(cfg.model().n_layer(), 12);
  EXPECT_EQ(cfg.model().n_embd(), 768);
  EXPECT_EQ(cfg.training().seq_len(), 1024);
  EXPECT_EQ(cfg.training().batch_size(), 4);
  EXPECT_DOUBLE_EQ(cfg.optimizer().lr(), 6e-4);
}

TEST(Config, DefaultsFillUnsetFields) {
  const TrainConfig cfg = parse_config(
      "data { train_pattern: \"x_*.bin\" }\ntraining { steps: 10 }\n", "min.textproto");
  EXPECT_NO_THROW(validate(cfg));
  EXPECT_EQ(cfg.model().vocab_size(), 50257);
  EXPECT_EQ(cfg.model().padded_vocab_multiple(), 64);
  EXPECT_TRUE(cfg.model().tie_embeddings());
  EXPECT_FALSE(cfg.model().recompute());
  EXPECT_EQ(cfg.model().block_size(), 1024);
  EXPECT_EQ(cfg.training().seq_len(), 1024);  // follows block_size
  EXPECT_EQ(cfg.training().grad_accum_steps(), 1);
  EXPECT_EQ(cfg.data().tokenizer(), "gpt2");
  EXPECT_EQ(cfg.optimizer().name(), "adamw");
  EXPECT_EQ(cfg.optimizer().schedule(), "cosine");
  EXPECT_DOUBLE_EQ(cfg.optimizer().min_lr(), cfg.optimizer().lr() / 10);
  EXPECT_DOUBLE_EQ(cfg.sample().temperature(), 1.0);
  EXPECT_EQ(cfg.parallel().tp(), 1);
  EXPECT_EQ(cfg.parallel().pp(), 1);
  EXPECT_EQ(cfg.parallel().dp(), 1);
  EXPECT_TRUE(cfg.defaulted.count("model.vocab_size"));
  EXPECT_FALSE(cfg.defaulted.count("training.steps"));
  EXPECT_TRUE(cfg.model().has_tie_embeddings());  // defaults are real values, printed by to_text
}

TEST(Config, WrittenValuesOverrideDefaults) {
  const TrainConfig cfg = parse_config(
      "model { tie_embeddings: false vocab_size: 50304 }\ntraining { grad_accum_steps: 4 }\n");
  EXPECT_FALSE(cfg.model().tie_embeddings());
  EXPECT_EQ(cfg.model().vocab_size(), 50304);
  EXPECT_EQ(cfg.training().grad_accum_steps(), 4);
  EXPECT_FALSE(cfg.defaulted.count("model.tie_embeddings"));
}

TEST(Config, RequiredFieldsAreReported) {
  const TrainConfig cfg = parse_config("", "empty.textproto");
  const std::string message = error_of([&] { validate(cfg); });
  EXPECT_NE(message.find("data.train_pattern"), std::string::npos) << message;
  EXPECT_NE(message.find("training.steps"), std::string::npos) << message;
}

struct RuleCase {
  std::vector<std::pair<std::string, std::string>> edits;  // (text in kBase, replacement)
  std::string field;                                       // field the message must name
  std::string hint;                                        // further text the message must hold
};

TEST(Config, EachRuleNamesFieldAndLine) {
  const std::vector<RuleCase> cases = {
      {{{"n_head: 4", "n_head: 5"}}, "model.n_head", "4 or 8"},
      {{{"n_layer: 4", "n_layer: 0"}}, "model.n_layer", "> 0"},
      {{{"n_embd: 256", "n_embd: 0"}}, "model.n_embd", "> 0"},
      {{{"block_size: 128", "block_size: 0"}}, "model.block_size", "> 0"},
      {{{"vocab_size: 50257", "vocab_size: 0"}}, "model.vocab_size", "> 0"},
      {{{"vocab_size: 50257", "vocab_size: 1000"}}, "model.vocab_size", ">= 50257"},
      {{{"vocab_size: 50257", "vocab_size: 100"}, {"\"gpt2\"", "\"byte\""}},
       "model.vocab_size",
       ">= 257"},
      {{{"seq_len: 128", "seq_len: 256"}},
       "training.seq_len",
       "context is longer than the positions"},
      {{{"train_pattern: \"train_*.bin\"", "train_pattern: \"\""}}, "data.train_pattern", "shards"},
      {{{"\"gpt2\"", "\"gtp2\""}}, "data.tokenizer", "did you mean \"gpt2\""},
      {{{"\"adamw\"", "\"adam\""}}, "optimizer.name", "did you mean \"adamw\""},
      {{{"lr: 1e-3", "lr: 0"}}, "optimizer.lr", "> 0"},
      {{{"lr: 1e-3", "lr: -0.1"}}, "optimizer.lr", "> 0"},
      {{{"beta1: 0.9", "beta1: 1.0"}}, "optimizer.beta1", "[0, 1)"},
      {{{"beta2: 0.95", "beta2: -0.5"}}, "optimizer.beta2", "[0, 1)"},
      {{{"eps: 1e-8", "eps: 0"}}, "optimizer.eps", "> 0"},
      {{{"warmup_steps: 20", "warmup_steps: 300"}},
       "optimizer.warmup_steps",
       "training.steps = 200 (line 23)"},
      {{{"\"cosine\"", "\"linear\""}}, "optimizer.schedule", "\"constant\""},
      {{{"steps: 200", "steps: 0"}}, "training.steps", "> 0"},
      {{{"batch_size: 8", "batch_size: 0"}}, "training.batch_size", "> 0"},
      {{{"seq_len: 128", "seq_len: 0"}}, "training.seq_len", "> 0"},
      {{{"grad_accum_steps: 1", "grad_accum_steps: 0"}}, "training.grad_accum_steps", ">= 1"},
      {{{"temperature: 0.8", "temperature: 0"}}, "sample.temperature", "> 0"},
      {{{"tp: 1", "tp: 3"}}, "parallel.tp", "nearest valid tp: 2 or 4"},
      {{{"pp: 1", "pp: 3"}}, "parallel.pp", "nearest valid pp x virtual_stages: 2 or 4"},
      {{{"tp: 1", "tp: 0"}}, "parallel.tp", ">= 1"},
      {{{"pp: 1", "pp: 0"}}, "parallel.pp", ">= 1"},
      {{{"dp: 1", "dp: 0"}}, "parallel.dp", ">= 1"},
  };
  ASSERT_TRUE(find_problems(parse_config(kBase, "cfg.textproto")).empty());
  for (const RuleCase& c : cases) {
    std::string text = kBase;
    for (const auto& [from, to] : c.edits) text = replaced(text, from, to);
    const TrainConfig cfg = parse_config(text, "cfg.textproto");
    const std::string message = error_of([&] { validate(cfg); });
    const std::string leaf = c.field.substr(c.field.find('.') + 1);
    const std::string where = "cfg.textproto:" + std::to_string(line_of(text, "  " + leaf + ":"));
    EXPECT_NE(message.find(c.field), std::string::npos) << c.field << ": " << message;
    EXPECT_NE(message.find(where + ": " + c.field), std::string::npos)
        << "expected " << where << " in: " << message;
    EXPECT_NE(message.find(c.hint), std::string::npos)
        << "expected " << c.hint << " in " << message;
  }
}

using Edits = std::vector<std::pair<std::string, std::string>>;  // (text in kBase, replacement)

// One constraint stated in src/proto/train_config.proto, checked at its boundary: `accepted`
// (the nearest valid value) must validate, `rejected` (just past it) must be reported naming
// `field`, the line that set it (unless `located` is false: a map field has no line) and `hint`.
struct Boundary {
  std::string constraint;
  Edits accepted;
  Edits rejected;
  std::string field;
  std::string hint;
  bool located = true;
  std::string line_text;  // text on the line the message must point at; "" = "  <leaf>:"
};

std::string edited(const Edits& edits) {
  std::string text = kBase;
  for (const auto& [from, to] : edits) text = replaced(text, from, to);
  return text;
}

// Edits that add a line to a section after `anchor` (a line of kBase).
std::pair<std::string, std::string> add_after(const std::string& anchor, const std::string& line) {
  return {anchor + "\n", anchor + "\n  " + line + "\n"};
}

// kBase with a checkpoint section holding `lines`.
std::pair<std::string, std::string> checkpoint_section(const std::string& lines) {
  return {"  dp: 1\n}\n", "  dp: 1\n}\ncheckpoint {\n" + lines + "}\n"};
}

TEST(Config, EveryProtoConstraintAtItsBoundary) {
  const auto pp2 = std::pair<std::string, std::string>{"pp: 1", "pp: 2"};
  const std::string existing = fs::temp_directory_path().string();
  const std::vector<Boundary> cases = {
      // ModelConfig
      {"vocab_size >= 257 for byte",
       {{"\"gpt2\"", "\"byte\""}, {"vocab_size: 50257", "vocab_size: 257"}},
       {{"\"gpt2\"", "\"byte\""}, {"vocab_size: 50257", "vocab_size: 256"}},
       "model.vocab_size",
       ">= 257"},
      {"vocab_size >= 50257 for gpt2",
       {},
       {{"vocab_size: 50257", "vocab_size: 50256"}},
       "model.vocab_size",
       ">= 50257"},
      {"n_layer > 0",
       {{"n_layer: 4", "n_layer: 1"}},
       {{"n_layer: 4", "n_layer: 0"}},
       "model.n_layer",
       "> 0"},
      {"n_head > 0",
       {{"n_head: 4", "n_head: 1"}},
       {{"n_head: 4", "n_head: 0"}},
       "model.n_head",
       "> 0"},
      {"n_head divides n_embd",
       {{"n_head: 4", "n_head: 8"}},
       {{"n_head: 4", "n_head: 6"}},
       "model.n_head",
       "does not divide model.n_embd = 256"},
      {"n_embd > 0",
       {{"n_embd: 256", "n_embd: 4"}},
       {{"n_embd: 256", "n_embd: 0"}},
       "model.n_embd",
       "> 0"},
      {"block_size > 0",
       {{"block_size: 128", "block_size: 1"}, {"seq_len: 128", "seq_len: 1"}},
       {{"block_size: 128", "block_size: 0"}, {"seq_len: 128", "seq_len: 1"}},
       "model.block_size",
       "> 0"},
      {"padded_vocab_multiple > 0",
       {add_after("  n_embd: 256", "padded_vocab_multiple: 1")},
       {add_after("  n_embd: 256", "padded_vocab_multiple: 0")},
       "model.padded_vocab_multiple",
       "> 0"},
      // DataConfig
      {"train_pattern required",
       {{"train_pattern: \"train_*.bin\"", "train_pattern: \"x\""}},
       {{"train_pattern: \"train_*.bin\"", "train_pattern: \"\""}},
       "data.train_pattern",
       "must name the training shards"},
      {"tokenizer is gpt2 or byte",
       {{"\"gpt2\"", "\"byte\""}},
       {{"\"gpt2\"", "\"bpe\""}},
       "data.tokenizer",
       "\"gpt2\", \"byte\""},
      // OptimizerConfig
      {"name is adamw or sgd",
       {{"\"adamw\"", "\"sgd\""}},
       {{"\"adamw\"", "\"lamb\""}},
       "optimizer.name",
       "\"adamw\", \"sgd\""},
      {"lr > 0", {{"lr: 1e-3", "lr: 1e-4"}}, {{"lr: 1e-3", "lr: 0"}}, "optimizer.lr", "> 0"},
      {"lr finite", {}, {{"lr: 1e-3", "lr: inf"}}, "optimizer.lr", "finite"},
      {"min_lr <= lr",
       {{"min_lr: 1e-4", "min_lr: 1e-3"}},
       {{"min_lr: 1e-4", "min_lr: 1.1e-3"}},
       "optimizer.min_lr",
       "[0, optimizer.lr = 0.001"},
      {"min_lr >= 0",
       {{"min_lr: 1e-4", "min_lr: 0"}},
       {{"min_lr: 1e-4", "min_lr: -1e-9"}},
       "optimizer.min_lr",
       "[0, "},
      {"weight_decay >= 0",
       {add_after("  eps: 1e-8", "weight_decay: 0")},
       {add_after("  eps: 1e-8", "weight_decay: -0.01")},
       "optimizer.weight_decay",
       ">= 0"},
      {"beta1 < 1",
       {{"beta1: 0.9", "beta1: 0.999"}},
       {{"beta1: 0.9", "beta1: 1"}},
       "optimizer.beta1",
       "[0, 1)"},
      {"beta1 >= 0",
       {{"beta1: 0.9", "beta1: 0"}},
       {{"beta1: 0.9", "beta1: -0.01"}},
       "optimizer.beta1",
       "[0, 1)"},
      {"beta2 < 1",
       {{"beta2: 0.95", "beta2: 0.999"}},
       {{"beta2: 0.95", "beta2: 1"}},
       "optimizer.beta2",
       "[0, 1)"},
      {"beta2 >= 0",
       {{"beta2: 0.95", "beta2: 0"}},
       {{"beta2: 0.95", "beta2: -0.01"}},
       "optimizer.beta2",
       "[0, 1)"},
      {"eps > 0", {{"eps: 1e-8", "eps: 1e-30"}}, {{"eps: 1e-8", "eps: 0"}}, "optimizer.eps", "> 0"},
      {"momentum < 1",
       {{"\"adamw\"", "\"sgd\""}, add_after("  eps: 1e-8", "momentum: 0.999")},
       {{"\"adamw\"", "\"sgd\""}, add_after("  eps: 1e-8", "momentum: 1")},
       "optimizer.momentum",
       "[0, 1)"},
      {"momentum >= 0",
       {add_after("  eps: 1e-8", "momentum: 0")},
       {add_after("  eps: 1e-8", "momentum: -0.1")},
       "optimizer.momentum",
       "[0, 1)"},
      {"grad_clip >= 0",
       {add_after("  eps: 1e-8", "grad_clip: 0")},
       {add_after("  eps: 1e-8", "grad_clip: -1")},
       "optimizer.grad_clip",
       ">= 0"},
      {"warmup_steps <= training.steps",
       {{"warmup_steps: 20", "warmup_steps: 200"}},
       {{"warmup_steps: 20", "warmup_steps: 201"}},
       "optimizer.warmup_steps",
       "exceeds training.steps = 200"},
      {"warmup_steps >= 0",
       {{"warmup_steps: 20", "warmup_steps: 0"}},
       {{"warmup_steps: 20", "warmup_steps: -1"}},
       "optimizer.warmup_steps",
       ">= 0"},
      {"schedule is cosine or constant",
       {{"\"cosine\"", "\"constant\""}},
       {{"\"cosine\"", "\"step\""}},
       "optimizer.schedule",
       "\"cosine\", \"constant\""},
      // TrainingConfig
      {"steps > 0",
       {{"warmup_steps: 20", "warmup_steps: 0"}, {"steps: 200", "steps: 1"}},
       {{"warmup_steps: 20", "warmup_steps: 0"}, {"steps: 200", "steps: 0"}},
       "training.steps",
       "> 0"},
      {"batch_size > 0",
       {{"batch_size: 8", "batch_size: 1"}},
       {{"batch_size: 8", "batch_size: 0"}},
       "training.batch_size",
       "> 0"},
      {"seq_len > 0",
       {{"seq_len: 128", "seq_len: 1"}},
       {{"seq_len: 128", "seq_len: 0"}},
       "training.seq_len",
       "> 0"},
      {"seq_len <= block_size",
       {},
       {{"seq_len: 128", "seq_len: 129"}},
       "training.seq_len",
       "exceeds model.block_size = 128"},
      {"grad_accum_steps >= 1",
       {{"grad_accum_steps: 1", "grad_accum_steps: 2"}},
       {{"grad_accum_steps: 1", "grad_accum_steps: 0"}},
       "training.grad_accum_steps",
       ">= 1"},
      {"val_every >= 0",
       {add_after("  batch_size: 8", "val_every: 0")},
       {add_after("  batch_size: 8", "val_every: -1")},
       "training.val_every",
       ">= 0"},
      {"val_steps > 0",
       {add_after("  batch_size: 8", "val_steps: 1")},
       {add_after("  batch_size: 8", "val_steps: 0")},
       "training.val_steps",
       "> 0"},
      {"log_every > 0",
       {add_after("  batch_size: 8", "log_every: 1")},
       {add_after("  batch_size: 8", "log_every: 0")},
       "training.log_every",
       "> 0"},
      {"threads >= 0",
       {add_after("  batch_size: 8", "threads: 0")},
       {add_after("  batch_size: 8", "threads: -1")},
       "training.threads",
       ">= 0"},
      {"peak_flops >= 0",
       {add_after("  batch_size: 8", "peak_flops: 0")},
       {add_after("  batch_size: 8", "peak_flops: -1")},
       "training.peak_flops",
       ">= 0"},
      {"peak_flops finite",
       {add_after("  batch_size: 8", "peak_flops: 1.5e11")},
       {add_after("  batch_size: 8", "peak_flops: inf")},
       "training.peak_flops",
       "finite"},
      // SampleConfig
      {"every >= 0",
       {add_after("  top_k: 40", "every: 0")},
       {add_after("  top_k: 40", "every: -1")},
       "sample.every",
       ">= 0"},
      {"tokens >= 0",
       {add_after("  top_k: 40", "tokens: 0")},
       {add_after("  top_k: 40", "tokens: -1")},
       "sample.tokens",
       ">= 0"},
      {"temperature > 0",
       {{"temperature: 0.8", "temperature: 1e-6"}},
       {{"temperature: 0.8", "temperature: 0"}},
       "sample.temperature",
       "> 0"},
      {"top_k <= vocab_size",
       {{"top_k: 40", "top_k: 50257"}},
       {{"top_k: 40", "top_k: 50258"}},
       "sample.top_k",
       "exceeds model.vocab_size = 50257"},
      {"top_k >= 0",
       {{"top_k: 40", "top_k: 0"}},
       {{"top_k: 40", "top_k: -1"}},
       "sample.top_k",
       ">= 0"},
      // ParallelConfig
      {"tp >= 1", {}, {{"tp: 1", "tp: 0"}}, "parallel.tp", ">= 1"},
      {"tp divides n_head",
       {{"tp: 1", "tp: 4"}},
       {{"tp: 1", "tp: 3"}},
       "parallel.tp",
       "does not divide model.n_head = 4"},
      {"pp >= 1", {}, {{"pp: 1", "pp: 0"}}, "parallel.pp", ">= 1"},
      {"pp x virtual_stages divides n_layer",
       {{"pp: 1", "pp: 4"}},
       {{"pp: 1", "pp: 3"}},
       "parallel.pp",
       "do not divide model.n_layer = 4"},
      {"dp >= 1", {{"dp: 1", "dp: 2"}}, {{"dp: 1", "dp: 0"}}, "parallel.dp", ">= 1"},
      {"strategy is auto or registered",
       {add_after("  dp: 1", "strategy: \"zero1\"")},
       {add_after("  dp: 1", "strategy: \"zero\"")},
       "parallel.strategy",
       "did you mean \"zero1\""},
      {"strategy_options are the strategy's",
       {add_after("  dp: 1",
                  "strategy: \"ddp\" strategy_options { key: \"bucket_mb\" value: "
                  "\"4\" }")},
       {add_after("  dp: 1",
                  "strategy: \"ddp\" strategy_options { key: \"bucket\" value: "
                  "\"4\" }")},
       "parallel.strategy_options",
       "strategy ddp has no option 'bucket' (options: bucket_mb)",
       false},
      {"sequence_parallel needs seq_len divisible by tp",
       {{"tp: 1", "tp: 2"}, add_after("  dp: 1", "sequence_parallel: true")},
       {{"tp: 1", "tp: 2"},
        add_after("  dp: 1", "sequence_parallel: true"),
        {"seq_len: 128", "seq_len: 127"}},
       "training.seq_len",
       "not divisible by parallel.tp = 2"},
      {"virtual_stages >= 1",
       {add_after("  dp: 1", "virtual_stages: 1")},
       {add_after("  dp: 1", "virtual_stages: 0")},
       "parallel.virtual_stages",
       ">= 1"},
      {"virtual_stages > 1 needs pp > 1",
       {pp2, add_after("  dp: 1", "virtual_stages: 2")},
       {add_after("  dp: 1", "virtual_stages: 2")},
       "parallel.virtual_stages",
       "needs pipeline parallelism"},
      {"micro_batches >= 0",
       {add_after("  dp: 1", "micro_batches: 0")},
       {add_after("  dp: 1", "micro_batches: -1")},
       "parallel.micro_batches",
       ">= 0"},
      {"micro_batches divides batch_size",
       {pp2, add_after("  dp: 1", "micro_batches: 4")},
       {pp2, add_after("  dp: 1", "micro_batches: 3")},
       "training.batch_size",
       "does not split into 3 micro-batches"},
      {"grad_accum_steps is 1 with pp > 1",
       {pp2},
       {pp2, {"grad_accum_steps: 1", "grad_accum_steps: 2"}},
       "training.grad_accum_steps",
       "must be 1 with pipeline parallelism"},
      {"schedule names (checked with pp = 1 too)",
       {add_after("  dp: 1", "schedule: \"gpipe\"")},
       {add_after("  dp: 1", "schedule: \"1f1f\"")},
       "parallel.schedule",
       "did you mean \"1f1b\"",
       true,
       "schedule: \"1f1f\""},
      {"1f1b needs virtual_stages = 1",
       {pp2, add_after("  dp: 1", "schedule: \"1f1b\"")},
       {pp2, add_after("  dp: 1", "schedule: \"1f1b\" virtual_stages: 2")},
       "parallel.schedule",
       "runs one model chunk per stage, but parallel.virtual_stages = 2",
       true,
       "schedule: \"1f1b\""},
      {"interleaved_1f1b needs virtual_stages > 1",
       {pp2, add_after("  dp: 1", "schedule: \"interleaved_1f1b\" virtual_stages: 2")},
       {pp2, add_after("  dp: 1", "schedule: \"interleaved_1f1b\" virtual_stages: 1")},
       "parallel.schedule",
       "needs parallel.virtual_stages > 1, but parallel.virtual_stages = 1",
       true,
       "schedule: \"interleaved_1f1b\""},
      {"interleaved_1f1b needs micro_batches >= pp",
       {pp2, add_after("  dp: 1", "virtual_stages: 2 micro_batches: 2")},
       {pp2, add_after("  dp: 1", "virtual_stages: 2\n  micro_batches: 1")},
       "parallel.micro_batches",
       "fewer than the 2 pipeline stages"},
      {"stage_layers sum to n_layer",
       {pp2, add_after("  dp: 1", "stage_layers: [1, 3]")},
       {pp2, add_after("  dp: 1", "stage_layers: [1, 2]")},
       "parallel.pp",
       "lists 2 counts summing to 3; it needs 2 counts >= 0 that sum to model.n_layer = 4"},
      {"stage_layers has pp x virtual_stages counts",
       {pp2, add_after("  dp: 1", "stage_layers: [0, 4]")},
       {pp2, add_after("  dp: 1", "stage_layers: [4]")},
       "parallel.pp",
       "lists 1 counts"},
      {"stage_layers counts >= 0",
       {},
       {pp2, add_after("  dp: 1", "stage_layers: [-1, 5]")},
       "parallel.pp",
       "counts >= 0"},
      // CheckpointConfig
      {"mode is sync, async or overlapped",
       {checkpoint_section("  dir: \"ck\"\n  mode: \"overlapped\"\n")},
       {checkpoint_section("  dir: \"ck\"\n  mode: \"lazy\"\n")},
       "checkpoint.mode",
       "\"sync\", \"async\", \"overlapped\""},
      {"overlapped needs adamw",
       {checkpoint_section("  mode: \"overlapped\"\n")},
       {checkpoint_section("  mode: \"overlapped\"\n"), {"\"adamw\"", "\"sgd\""}},
       "checkpoint.mode",
       "replays AdamW"},
      {"window >= 1",
       {checkpoint_section("  window: 1\n")},
       {checkpoint_section("  window: 0\n")},
       "checkpoint.window",
       ">= 1"},
      {"every_steps >= 0",
       {checkpoint_section("  every_steps: 0\n")},
       {checkpoint_section("  every_steps: -1\n")},
       "checkpoint.every_steps",
       ">= 0"},
      {"every_steps > 0 needs dir",
       {checkpoint_section("  dir: \"ck\"\n  every_steps: 1\n")},
       {checkpoint_section("  every_steps: 1\n")},
       "checkpoint.every_steps",
       "needs checkpoint.dir"},
      {"keep >= 0",
       {checkpoint_section("  keep: 0\n")},
       {checkpoint_section("  keep: -1\n")},
       "checkpoint.keep",
       ">= 0"},
      // TrainConfig
      {"resume latest needs checkpoint.dir",
       {checkpoint_section("  dir: \"ck\"\n"), {"parallel {", "resume: \"latest\"\nparallel {"}},
       {{"parallel {", "resume: \"latest\"\nparallel {"}},
       "resume",
       "needs checkpoint.dir"},
      {"resume path must exist",
       {{"parallel {", "resume: \"" + existing + "\"\nparallel {"}},
       {{"parallel {", "resume: \"/nonexistent/braid/step_5\"\nparallel {"}},
       "resume",
       "does not exist"},
  };
  for (const Boundary& b : cases) {
    const std::string good = edited(b.accepted);
    const std::vector<std::string> problems = find_problems(parse_config(good, "cfg.textproto"));
    EXPECT_TRUE(problems.empty()) << b.constraint << ": the accepted side is rejected: "
                                  << (problems.empty() ? "" : problems[0]);
    const std::string bad = edited(b.rejected);
    const std::string message = error_of([&] { validate(parse_config(bad, "cfg.textproto")); });
    EXPECT_NE(message.find(b.field), std::string::npos) << b.constraint << ": " << message;
    EXPECT_NE(message.find(b.hint), std::string::npos)
        << b.constraint << ": expected \"" << b.hint << "\" in: " << message;
    if (b.located) {
      const size_t dot = b.field.find('.');
      const std::string needle = !b.line_text.empty()       ? b.line_text
                                 : dot == std::string::npos ? b.field + ":"
                                                            : "  " + b.field.substr(dot + 1) + ":";
      const std::string where = "cfg.textproto:" + std::to_string(line_of(bad, needle));
      EXPECT_NE(message.find(where + ": " + b.field), std::string::npos)
          << b.constraint << ": expected " << where << " in: " << message;
    }
  }
}

// The log once read "parallel.pp = 2 x parallel.virtual_stages = 6 virtual stages" when
// virtual_stages was 3: the product was printed where the field's value belongs.
TEST(Config, VirtualStageMessageShowsEachFactor) {
  const TrainConfig cfg = parse_config(
      edited({{"pp: 1", "pp: 2"}, add_after("  dp: 1", "virtual_stages: 3")}), "cfg.textproto");
  const std::vector<std::string> problems = find_problems(cfg);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("parallel.pp = 2 x parallel.virtual_stages = 3 gives 6 virtual "
                             "stages, which do not divide model.n_layer = 4"),
            std::string::npos)
      << problems[0];
}

// tp * pp * dp against the ranks the job started: known only at run time, so checked by the
// Trainer through world_size_problem, in one line that names the fields and the fix.
TEST(Config, WorldSizeProblemNamesFieldsAndFix) {
  const TrainConfig cfg = parse_config(edited({{"dp: 1", "dp: 2"}}), "cfg.textproto");
  EXPECT_EQ(world_size_problem(cfg, 2), "");
  const std::string four = world_size_problem(cfg, 4);
  EXPECT_EQ(four,
            "parallel.tp = 1 (line 33) x parallel.pp = 1 (line 34) x parallel.dp = 2 (line 35) is "
            "2 ranks, but the job has 4; with tp and pp as they are, dp=4 would fit (--set "
            "parallel.dp=4), or start 2 ranks");
  const TrainConfig tp2 = parse_config(edited({{"tp: 1", "tp: 2"}}), "cfg.textproto");
  const std::string three = world_size_problem(tp2, 3);
  EXPECT_NE(three.find("no dp fits, as tp x pp = 2 does not divide 3; start 2 ranks (or another "
                       "multiple of 2, with dp to match)"),
            std::string::npos)
      << three;
  EXPECT_EQ(three.find('\n'), std::string::npos) << three;
  // The Trainer stops with it before loading data or building the model.
  const std::string message = error_of([&] { Trainer trainer(cfg); });
  EXPECT_NE(message.find("invalid config: parallel.tp = 1 (line 33) x parallel.pp = 1 (line 34) "
                         "x parallel.dp = 2 (line 35) is 2 ranks, but the job has 1"),
            std::string::npos)
      << message;
}

TEST(Config, HeadCountMessageNamesDivisors) {
  const TrainConfig cfg = parse_config(replaced(kBase, "n_head: 4", "n_head: 5"), "cfg.textproto");
  const std::vector<std::string> problems = find_problems(cfg);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "cfg.textproto:3: model.n_head = 5 does not divide model.n_embd = 256 (line 4) (each "
            "head gets n_embd / n_head channels); head counts that divide it: 4 or 8");
}

TEST(Config, DefaultedValueIsMarkedInMessages) {
  // block_size left at its default 1024, seq_len written larger.
  const TrainConfig cfg = parse_config(
      "data { train_pattern: \"x\" }\ntraining {\n  steps: 1\n  seq_len: 2048\n}\n", "d.textproto");
  const std::string message = error_of([&] { validate(cfg); });
  EXPECT_NE(message.find("d.textproto:4: training.seq_len = 2048"), std::string::npos) << message;
  EXPECT_NE(message.find("model.block_size = 1024 (default)"), std::string::npos) << message;
}

TEST(Config, TypoSuggestsFieldWithLocation) {
  const std::string message =
      error_of([] { parse_config("model {\n  n_layer: 4\n  n_layr: 4\n}\n", "typo.textproto"); });
  EXPECT_NE(message.find("typo.textproto:3:3: unknown field \"n_layr\" in braid.proto.ModelConfig "
                         "(did you mean \"n_layer\"?)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line expected: " << message;
}

TEST(Config, FieldOutsideItsSectionSuggestsPath) {
  const std::string message = error_of([] { parse_config("lr: 1e-3\n", "top.textproto"); });
  EXPECT_NE(message.find("top.textproto:1:1: unknown field \"lr\" in braid.proto.TrainConfig"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("did you mean \"optimizer.lr\""), std::string::npos) << message;
}

TEST(Config, ClippedNameSuggestsFullName) {
  const std::string message = error_of([] { parse_config("model { vocab: 100 }", "x.textproto"); });
  EXPECT_NE(message.find("did you mean \"vocab_size\""), std::string::npos) << message;
}

TEST(Config, UnrelatedNameGetsNoSuggestion) {
  const std::string message =
      error_of([] { parse_config("model { frobnicate_everything: 1 }", "x.textproto"); });
  EXPECT_NE(message.find("unknown field \"frobnicate_everything\""), std::string::npos) << message;
  EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
}

TEST(Config, SyntaxErrorsHaveLocation) {
  std::string message =
      error_of([] { parse_config("model {\n  n_layer: four\n}\n", "bad.textproto"); });
  EXPECT_NE(message.find("bad.textproto:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("integer"), std::string::npos) << message;

  message = error_of([] { parse_config("model {\n  n_layer: 4\n", "open.textproto"); });
  EXPECT_NE(message.find("open.textproto:"), std::string::npos) << message;
  EXPECT_NE(message.find("end of file"), std::string::npos) << message;

  message =
      error_of([] { parse_config("model {\n  n_layer: 4\n  n_layer: 5\n}\n", "dup.textproto"); });
  EXPECT_NE(message.find("dup.textproto:3:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("\"n_layer\" is set a second time"), std::string::npos) << message;
}

TEST(Config, MissingFileNamesPath) {
  const std::string message = error_of([] { load_config("/nonexistent/braid/none.textproto"); });
  EXPECT_NE(message.find("/nonexistent/braid/none.textproto"), std::string::npos) << message;
  EXPECT_NE(message.find("not found"), std::string::npos) << message;
}

TEST(Config, FileErrorsNameTheFile) {
  const fs::path path = fs::temp_directory_path() / "braid_test_config_typo.textproto";
  {
    std::ofstream out(path);
    out << "# comment\ntraining {\n  stpes: 10\n}\n";
  }
  const std::string message = error_of([&] { load_config(path.string()); });
  fs::remove(path);
  EXPECT_NE(message.find(path.string() + ":3:3: unknown field \"stpes\""), std::string::npos)
      << message;
  EXPECT_NE(message.find("did you mean \"steps\""), std::string::npos) << message;
}

TEST(Config, SetOverridesEachType) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  const std::vector<std::string> rest = apply_overrides(
      cfg, {"--set", "model.n_layer=2", "--set=optimizer.lr=3e-4", "--out", "run1", "--set",
            "data.tokenizer=byte", "--set", "model.recompute=true", "--set", "training.seed=42"});
  EXPECT_EQ(rest, (std::vector<std::string>{"--out", "run1"}));
  EXPECT_EQ(cfg.model().n_layer(), 2);
  EXPECT_DOUBLE_EQ(cfg.optimizer().lr(), 3e-4);
  EXPECT_EQ(cfg.data().tokenizer(), "byte");
  EXPECT_TRUE(cfg.model().recompute());
  EXPECT_EQ(cfg.training().seed(), 42u);
  EXPECT_EQ(cfg.origin("model.n_layer"), "--set model.n_layer=2");
  EXPECT_FALSE(cfg.field_lines.count("model.n_layer"));
  EXPECT_NO_THROW(validate(cfg));
}

TEST(Config, StepsShorthand) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  EXPECT_TRUE(apply_overrides(cfg, {"--steps", "50"}).empty());
  EXPECT_EQ(cfg.training().steps(), 50);
  EXPECT_EQ(cfg.origin("training.steps"), "--steps 50");
  apply_overrides(cfg, {"--steps=70"});
  EXPECT_EQ(cfg.training().steps(), 70);
  // The override is checked again: warmup 20 no longer fits in 10 steps.
  apply_overrides(cfg, {"--steps", "10"});
  const std::string message = error_of([&] { validate(cfg); });
  EXPECT_NE(message.find("optimizer.warmup_steps"), std::string::npos) << message;
  EXPECT_NE(message.find("training.steps = 10 (from --steps 10)"), std::string::npos) << message;
}

TEST(Config, OverrideOriginAppearsInValidation) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  apply_overrides(cfg, {"--set", "model.n_head=3"});
  const std::string message = error_of([&] { validate(cfg); });
  EXPECT_NE(message.find("--set model.n_head=3: model.n_head = 3 does not divide"),
            std::string::npos)
      << message;
}

TEST(Config, DerivedDefaultsFollowOverrides) {
  TrainConfig cfg = parse_config("data { train_pattern: \"x\" }\ntraining { steps: 5 }\n");
  apply_overrides(cfg, {"--set", "model.block_size=256", "--set", "optimizer.lr=2e-3"});
  EXPECT_EQ(cfg.training().seq_len(), 256);
  EXPECT_DOUBLE_EQ(cfg.optimizer().min_lr(), 2e-4);
  EXPECT_EQ(cfg.model().vocab_size(), 50257);  // independent defaults stay
  // A written value does not follow.
  TrainConfig tiny = load_config(example_config("tiny.textproto"));
  apply_overrides(tiny, {"--set", "model.block_size=256"});
  EXPECT_EQ(tiny.training().seq_len(), 128);
}

TEST(Config, SetUnknownPathSuggests) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  std::string message = error_of([&] { apply_overrides(cfg, {"--set", "model.n_layr=2"}); });
  EXPECT_NE(message.find("unknown field \"n_layr\" in braid.proto.ModelConfig"), std::string::npos)
      << message;
  EXPECT_NE(message.find("did you mean \"model.n_layer\""), std::string::npos) << message;
  EXPECT_NE(message.find("--set model.n_layr=2"), std::string::npos) << message;

  message = error_of([&] { apply_overrides(cfg, {"--set", "modle.n_layer=2"}); });
  EXPECT_NE(message.find("did you mean \"model\""), std::string::npos) << message;

  message = error_of([&] { apply_overrides(cfg, {"--set", "model.n_layer.x=2"}); });
  EXPECT_NE(message.find("not a section"), std::string::npos) << message;
}

TEST(Config, SetBadValueNamesType) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  struct Bad {
    std::string arg;
    std::string expected;
  };
  const std::vector<Bad> cases = {
      {"model.n_layer=abc", "int32"},
      {"model.n_layer=2.5", "int32"},
      {"model.n_layer=99999999999", "int32"},
      {"training.steps=", "int64"},
      {"training.seed=-1", "uint64"},
      {"optimizer.lr=fast", "double"},
      {"optimizer.lr=1e-3x", "double"},
      {"model.recompute=maybe", "true or false"},
      {"model=3", "section"},
      {"model.n_layer", "<field.path>=<value>"},
  };
  for (const Bad& b : cases) {
    const std::string message = error_of([&] { apply_overrides(cfg, {"--set", b.arg}); });
    EXPECT_NE(message.find(b.expected), std::string::npos) << b.arg << ": " << message;
  }
  EXPECT_NE(error_of([&] { apply_overrides(cfg, {"--steps"}); }).find("needs a value"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              apply_overrides(cfg, {"--steps", "many"});
            }).find("int64"),
            std::string::npos);
  // A failed override leaves the config as it was.
  EXPECT_EQ(cfg.model().n_layer(), 4);
}

TEST(Config, EverythingAfterDoubleDashIsLeftAlone) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  const auto rest = apply_overrides(cfg, {"--steps", "3", "--", "--steps", "9"});
  EXPECT_EQ(cfg.training().steps(), 3);
  EXPECT_EQ(rest, (std::vector<std::string>{"--", "--steps", "9"}));
}

TEST(Config, ConfigFromArgs) {
  std::vector<std::string> rest;
  const TrainConfig cfg = config_from_args(
      {"--config", example_config("tiny.textproto"), "--steps", "50", "--verbose"}, &rest);
  EXPECT_EQ(cfg.training().steps(), 50);
  EXPECT_EQ(cfg.model().n_layer(), 4);
  EXPECT_EQ(rest, (std::vector<std::string>{"--verbose"}));

  EXPECT_NE(error_of([] {
              config_from_args({"--steps", "5"});
            }).find("missing --config"),
            std::string::npos);
  // Validation runs after overrides.
  EXPECT_NE(error_of([] {
              config_from_args(
                  {"--config=" + example_config("tiny.textproto"), "--set", "parallel.pp=3"});
            }).find("nearest valid pp x virtual_stages: 2 or 4"),
            std::string::npos);
}

TEST(Config, ToTextRoundTrips) {
  TrainConfig cfg = load_config(example_config("tiny.textproto"));
  apply_overrides(cfg, {"--set", "optimizer.lr=3e-4", "--set", "sample.prompt=say \"hi\"\n"});
  const std::string text = to_text(cfg);
  const TrainConfig back = parse_config(text, "roundtrip");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(cfg.proto, back.proto)) << text;
  EXPECT_TRUE(back.defaulted.empty()) << "every field is written out";
  EXPECT_NE(text.find("n_layer: 4"), std::string::npos) << text;
  EXPECT_NE(text.find("padded_vocab_multiple: 64"), std::string::npos) << text;
  EXPECT_NO_THROW(validate(back));
}

}  // namespace
}  // namespace braid::train

namespace braid::train {
namespace {

// training.device: "cpu" by default; anything but "cpu" and "cuda" is named; "cuda" says why it
// cannot run in this build or on this machine, whatever the layout.
TEST(Config, TrainingDeviceAtItsBoundaries) {
  const std::string device_line = "grad_accum_steps: 1";
  TrainConfig plain = parse_config(kBase, "base");
  EXPECT_EQ(plain.training().device(), "cpu");
  EXPECT_NO_THROW(validate(plain));
  EXPECT_NO_THROW(validate(
      parse_config(replaced(kBase, device_line, device_line + "\n  device: \"cpu\""), "cpu")));
  for (const std::string bad : {"gpu", "CUDA", "cuda:1"}) {
    const std::string text =
        replaced(kBase, device_line, device_line + "\n  device: \"" + bad + "\"");
    const std::string e = error_of([&] { validate(parse_config(text, "bad")); });
    EXPECT_NE(e.find("training.device = \"" + bad + "\" must be \"cpu\" or \"cuda\""),
              std::string::npos)
        << e;
  }
  const std::string cuda = replaced(kBase, device_line, device_line + "\n  device: \"cuda\"");
  const std::string problem = device_problem("cuda");
  if (problem.empty()) {
    EXPECT_NO_THROW(validate(parse_config(cuda, "cuda")));
  } else {
    const std::string e = error_of([&] { validate(parse_config(cuda, "cuda")); });
    EXPECT_NE(e.find("training.device = \"cuda\" " + problem), std::string::npos) << e;
  }
  // Every layout is allowed on the device: only the machine's problem, if any, is reported.
  for (const auto& [field, layout] : {std::pair<std::string, std::string>{"parallel.dp", "dp: 2"},
                                      {"parallel.pp", "pp: 2"},
                                      {"parallel.tp", "tp: 2"}}) {
    const TrainConfig parallel =
        parse_config(replaced(cuda, layout.substr(0, 2) + ": 1", layout), layout.substr(0, 2));
    if (problem.empty()) {
      EXPECT_NO_THROW(validate(parallel)) << field;
    } else {
      const std::string e = error_of([&] { validate(parallel); });
      EXPECT_NE(e.find(problem), std::string::npos) << e;
      EXPECT_EQ(e.find(field), std::string::npos) << e;
    }
  }
}

}  // namespace
}  // namespace braid::train
