// braid-tokenize: tokenises a text file into llm.c-format .bin shards, optionally split train/val.
//
//   braid-tokenize --tokenizer gpt2|byte [--vocab-dir DIR] --input text.txt --output out.bin
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
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/data/token_shard.h"
#include "braid/data/tokenizer.h"

namespace {

constexpr const char* kUsage =
    "usage: braid-tokenize --tokenizer gpt2|byte [--vocab-dir DIR] --input TEXT --output OUT.bin\n"
    "                      [--split-val FRACTION --val-output VAL.bin] [--eot-marker STR]\n"
    "\n"
    "  --tokenizer   gpt2 (OpenAI GPT-2 BPE, vocab 50257) or byte (vocab 257); default gpt2\n"
    "  --vocab-dir   folder with encoder.json and vocab.bpe; default $BRAID_DATA_DIR/gpt2 or\n"
    "                data/gpt2 (scripts/fetch_gpt2_vocab.sh fills it)\n"
    "  --input       UTF-8 text file\n"
    "  --output      training shard to write (llm.c .bin format)\n"
    "  --split-val   fraction of tokens, taken from the end, written to --val-output instead\n"
    "  --eot-marker  text that marks a document start in the input; becomes the EOT token\n"
    "                (default \"<|endoftext|>\"; an empty string disables it)\n";

struct Options {
  std::string tokenizer = "gpt2";
  std::string vocab_dir;
  std::string input;
  std::string output;
  std::string val_output;
  double split_val = 0.0;
  std::string eot_marker = "<|endoftext|>";
};

Options parse_options(int argc, char** argv) {
  const std::vector<std::string> known = {"--tokenizer", "--vocab-dir",  "--input",     "--output",
                                          "--split-val", "--val-output", "--eot-marker"};
  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    BRAID_CHECK(std::find(known.begin(), known.end(), arg) != known.end(),
                "unknown argument '{}'; run with --help for the accepted flags", arg);
    if (!has_value) {
      BRAID_CHECK(i + 1 < argc, "flag {} needs a value", arg);
      value = argv[++i];
    }
    values[arg] = value;
  }

  Options options;
  auto take = [&](const char* flag, std::string& into) {
    if (auto it = values.find(flag); it != values.end()) into = it->second;
  };
  take("--tokenizer", options.tokenizer);
  take("--vocab-dir", options.vocab_dir);
  take("--input", options.input);
  take("--output", options.output);
  take("--val-output", options.val_output);
  take("--eot-marker", options.eot_marker);
  if (auto it = values.find("--split-val"); it != values.end()) {
    char* end = nullptr;
    options.split_val = std::strtod(it->second.c_str(), &end);
    BRAID_CHECK(end != it->second.c_str() && *end == '\0' && options.split_val > 0.0 &&
                    options.split_val < 1.0,
                "--split-val must be a fraction strictly between 0 and 1 (e.g. 0.05), got '{}'",
                it->second);
  }
  if (options.vocab_dir.empty()) {
    const char* data_dir = std::getenv("BRAID_DATA_DIR");
    options.vocab_dir = std::string(data_dir && *data_dir ? data_dir : "data") + "/gpt2";
  }
  BRAID_CHECK(!options.input.empty(), "--input TEXT is required (the text file to tokenise)");
  BRAID_CHECK(!options.output.empty(), "--output OUT.bin is required (the shard to write)");
  BRAID_CHECK((options.split_val > 0.0) == !options.val_output.empty(),
              "--split-val and --val-output go together: give both to write a validation shard, "
              "or neither");
  return options;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(), "cannot open input text '{}' (expected a readable UTF-8 text file)", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
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
  const Options options = parse_options(argc, argv);
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-tokenize: error: %s\n", e.what());
    return 1;
  }
}
