// A custom training loop on libbraid directly: a byte-level GPT learns a text file (or a
// built-in verse) with AdamW, no Trainer and no config file.
//   minimal_train [TEXT_FILE [STEPS]]   (--help for more)
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "braid/data/tokenizer.h"
#include "braid/nn/gpt.h"
#include "braid/optim/clip.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/schedule.h"

namespace {

const char* kDefaultText =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
    "the face of the waters. And God said, Let there be light: and there was light. ";

const braid::Usage kUsage{
    .program = "minimal_train",
    .synopsis = "[TEXT_FILE [STEPS]]",
    .summary =
        "A byte-level GPT learns a text file with AdamW on libbraid directly (no Trainer, "
        "no config),\nthen prints a sample.",
    .arguments = {{"TEXT_FILE", "", "text to learn; default: a built-in verse"},
                  {"STEPS", "", "optimizer steps; default 60"}},
    .example = "minimal_train README.md 100"};

std::string read_text(const std::vector<std::string>& arguments) {
  if (arguments.empty()) return kDefaultText;
  std::ifstream in(arguments[0], std::ios::binary);
  BRAID_CHECK(in.good(), "cannot open text file '{}'", arguments[0]);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int parse_steps(const std::vector<std::string>& arguments) {
  if (arguments.size() < 2) return 60;
  const std::string& text = arguments[1];
  int steps = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), steps);
  if (ec != std::errc() || end != text.data() + text.size() || steps < 1)
    throw braid::UsageError("STEPS must be a positive whole number, got '" + text + "'");
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid;
  try {
    const CommandLine cl = parse_command_line(kUsage, {argv + 1, argv + argc});
    if (cl.help) return print_help(kUsage);
    const int steps = parse_steps(cl.arguments);
    const std::string text = read_text(cl.arguments);
    data::ByteTokenizer tokenizer;
    const std::vector<int32_t> ids = tokenizer.encode(text);
    const int64_t batch = 4, seq = 32;
    BRAID_CHECK(static_cast<int64_t>(ids.size()) > seq + 1, "text too short: {} bytes", ids.size());

    nn::GptConfig config;
    config.vocab_size = tokenizer.vocab_size();
    config.n_layer = 2;
    config.n_head = 4;
    config.n_embd = 64;
    config.block_size = seq;
    nn::Gpt model(config);
    model.init_weights(/*seed=*/42);
    optim::AdamW adamw(optim::decay_groups(model.named_parameters(), 0.1f), {});
    optim::LrSchedule schedule{3e-3f, 3e-4f, 10, steps, "cosine"};

    for (int step = 0; step < steps; ++step) {
      // Windows at evenly spread offsets that move every step.
      std::vector<int32_t> inputs, targets;
      for (int64_t b = 0; b < batch; ++b) {
        const size_t start = (static_cast<size_t>(step) * 131 + b * 977) % (ids.size() - seq - 1);
        inputs.insert(inputs.end(), ids.begin() + start, ids.begin() + start + seq);
        targets.insert(targets.end(), ids.begin() + start + 1, ids.begin() + start + seq + 1);
      }
      model.zero_grad();
      Tensor loss = model.loss(Tensor::from_vector(inputs, {batch, seq}),
                               Tensor::from_vector(targets, {batch, seq}));
      loss.backward();
      const optim::ClipResult clip = optim::clip_coefficient(model.parameters(), 1.0f);
      adamw.step(schedule.at(step), clip.scale);
      if (step % 10 == 0 || step == steps - 1)
        std::printf("step %3d  loss %.4f  grad norm %.3f\n", step, loss.item(), clip.norm);
    }
    nn::SampleOptions options;
    options.max_new_tokens = 80;
    options.temperature = 0.7f;
    options.top_k = 20;
    const std::vector<int32_t> out = model.generate(tokenizer.encode("And God"), options);
    std::printf("sample: %s\n", tokenizer.decode(out).c_str());
    return 0;
  } catch (const UsageError& e) {
    return print_usage_error(kUsage, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minimal_train: error: %s\n", e.what());
    return 1;
  }
}
