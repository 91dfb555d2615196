// Tests for the training config: loading, defaults, validation messages, overrides, round trip.
#include "braid/train/config.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "braid/core/error.h"

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
