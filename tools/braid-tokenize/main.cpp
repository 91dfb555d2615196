// braid-tokenize: tokenises a text file into llm.c-format .bin shards, optionally split train/val.
//
//   braid-tokenize [--tokenizer gpt2|byte] [--vocab-dir DIR] --input text.txt --output out.bin
//                  [--split-val 0.05 --val-output val.bin] [--eot-marker STR]
//
// Documents: every occurrence of the EOT marker (default "<|endoftext|>") in the input becomes
// the tokenizer's end-of-text token, so a file written as "<|endoftext|>doc1<|endoftext|>doc2"
// yields EOT doc1 EOT doc2, llm.c's convention of an EOT before each document. The validation
// split takes the last fraction of tokens, moved to the nearest document start when one is close.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "braid/data/token_shard.h"
#include "braid/data/tokenizer.h"
#include "braid/data/unicode.h"

namespace {

const braid::Usage kUsage{
    .program = "braid-tokenize",
    .synopsis =
        "[--tokenizer gpt2|byte] [--vocab-dir DIR] --input TEXT --output OUT.bin\n"
        "[--split-val FRACTION --val-output VAL.bin] [--eot-marker STR]",
    .summary =
        "Tokenises a UTF-8 text file into llm.c-format .bin shards, optionally splitting off "
        "the last\nfraction of tokens as validation.",
    .flags =
        {{"--tokenizer", "NAME",
          "gpt2 (OpenAI GPT-2 BPE, vocab 50257) or byte (vocab 257); default gpt2"},
         {"--vocab-dir", "DIR",
          "holds encoder.json and vocab.bpe; default $BRAID_DATA_DIR/gpt2, else data/gpt2"},
         {"--input", "TEXT", "UTF-8 text file, not empty", true},
         {"--output", "OUT.bin", "training shard to write (llm.c .bin format)", true},
         {"--split-val", "FRACTION", "fraction of tokens, from the end, written to --val-output"},
         {"--val-output", "VAL.bin", "validation shard to write (with --split-val)"},
         {"--eot-marker", "STR",
          "marks a document start, made the EOT token; default \"<|endoftext|>\", \"\": none"}},
    .example =
        "braid-tokenize --tokenizer gpt2 --input data/kjv.txt --output data/kjv_train.bin "
        "--split-val 0.05 --val-output data/kjv_val.bin"};

struct Options {
  std::string tokenizer = "gpt2";
  std::string vocab_dir;
  std::string input;
  std::string output;
  std::string val_output;
  double split_val = 0.0;
  std::string eot_marker = "<|endoftext|>";
};

// Throws braid::UsageError for a mistake on the command line; nullopt after --help.
std::optional<Options> parse_options(int argc, char** argv) {
  const braid::CommandLine cl = braid::parse_command_line(kUsage, {argv + 1, argv + argc});
  if (cl.help) return std::nullopt;
  Options options;
  auto take = [&](const char* flag, std::string& into) {
    if (auto value = cl.value(flag)) into = *value;
  };
  take("--tokenizer", options.tokenizer);
  take("--vocab-dir", options.vocab_dir);
  take("--input", options.input);
  take("--output", options.output);
  take("--val-output", options.val_output);
  take("--eot-marker", options.eot_marker);
  if (auto text = cl.value("--split-val")) {
    char* end = nullptr;
    options.split_val = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0' || !(options.split_val > 0.0) ||
        !(options.split_val < 1.0))
      throw braid::UsageError(fmt::format(
          "--split-val must be a fraction strictly between 0 and 1 (e.g. 0.05), got '{}'", *text));
  }
  if (options.vocab_dir.empty()) {
    const char* data_dir = std::getenv("BRAID_DATA_DIR");
    options.vocab_dir = std::string(data_dir && *data_dir ? data_dir : "data") + "/gpt2";
  }
  if ((options.split_val > 0.0) != !options.val_output.empty())
    throw braid::UsageError(
        "--split-val and --val-output go together: give both to write a validation shard, or "
        "neither");
  return options;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(), "cannot open input text '{}' (expected a readable UTF-8 text file)", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  // The tokenizers take any bytes, but a file that is not UTF-8 text (a binary, or text in
  // another encoding) would silently become a shard of garbage: say where it went wrong.
  BRAID_CHECK(!text.empty(), "input text '{}' is empty (expected UTF-8 text)", path);
  if (const std::optional<size_t> bad = braid::data::first_invalid_utf8(text)) {
    const auto line =
        std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*bad), '\n') + 1;
    BRAID_FAIL(
        "input text '{}' is not valid UTF-8: malformed sequence at byte offset {} (line {}, byte "
        "0x{:02X}); expected UTF-8 text",
        path, *bad, line, static_cast<unsigned char>(text[*bad]));
  }
  return text;
}

// Token index where validation starts: the last `fraction` of the tokens, moved to the closest
// document start (an EOT) when one lies within half the validation size, so that validation
// holds whole documents.
size_t choose_split(const std::vector<int32_t>& tokens, int32_t eot, double fraction) {
  const auto n = static_cast<double>(tokens.size());
  const auto target = static_cast<size_t>(std::llround(n * (1.0 - fraction)));
  const double slack = n * fraction / 2;
  size_t best = target;
  double best_distance = slack + 1;
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] != eot) continue;
    const double distance = std::fabs(static_cast<double>(i) - static_cast<double>(target));
    if (distance <= slack && distance < best_distance) {
      best = i;
      best_distance = distance;
    }
  }
  return best;
}

int run(int argc, char** argv) {
  const std::optional<Options> parsed = parse_options(argc, argv);
  if (!parsed) return braid::print_help(kUsage);
  const Options& options = *parsed;
  const auto tokenizer = braid::data::make_tokenizer(options.tokenizer, options.vocab_dir);
  const std::string text = read_text(options.input);

  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> tokens;
  size_t documents = 0;
  const std::string_view view(text);
  size_t pos = 0;
  while (pos <= view.size()) {
    const size_t marker =
        options.eot_marker.empty() ? std::string_view::npos : view.find(options.eot_marker, pos);
    const size_t end = marker == std::string_view::npos ? view.size() : marker;
    const std::vector<int32_t> ids = tokenizer->encode(view.substr(pos, end - pos));
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    if (marker == std::string_view::npos) break;
    tokens.push_back(tokenizer->eot_token());
    ++documents;
    pos = marker + options.eot_marker.size();
  }
  BRAID_CHECK(tokens.size() > documents,
              "input text '{}' holds no text, only {} EOT marker{} (expected UTF-8 text)",
              options.input, documents, documents == 1 ? "" : "s");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("braid-tokenize: %s: %zu bytes -> %zu tokens (%zu EOT markers) in %.2f s\n",
              tokenizer->name().c_str(), text.size(), tokens.size(), documents, seconds);

  size_t split = tokens.size();
  if (options.split_val > 0.0) {
    split = choose_split(tokens, tokenizer->eot_token(), options.split_val);
    BRAID_CHECK(split > 0 && split < tokens.size(),
                "a {} validation split of {} tokens leaves train or validation empty; use more "
                "text or another fraction",
                options.split_val, tokens.size());
  }
  const std::span<const int32_t> all(tokens);
  braid::data::write_token_shard(options.output, all.first(split));
  std::printf("braid-tokenize: wrote %zu train tokens to %s\n", split, options.output.c_str());
  if (options.split_val > 0.0) {
    braid::data::write_token_shard(options.val_output, all.subspan(split));
    std::printf(
        "braid-tokenize: wrote %zu validation tokens (%.1f%%) to %s\n", tokens.size() - split,
        100.0 * static_cast<double>(tokens.size() - split) / static_cast<double>(tokens.size()),
        options.val_output.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const braid::UsageError& e) {
    return braid::print_usage_error(kUsage, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-tokenize: error: %s\n", e.what());
    return 1;
  }
}
