// Gpt2Tokenizer: OpenAI's GPT-2 byte-level BPE (encoder.json + vocab.bpe), id-for-id exact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/data/tokenizer.h"

namespace braid::data {

// Splits text the way GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does, hand-written (std::regex has no \p classes and is slow). Pieces are views into the
// text and concatenate back to it exactly.
class Gpt2Pretokenizer {
 public:
  explicit Gpt2Pretokenizer(std::string_view text) : text_(text) {}
  // Sets `piece` to the next piece; false at the end of the text.
  bool next(std::string_view& piece);

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// All pieces at once (for tests and tools; encode() streams them).
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

class Gpt2Tokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;

  // Reads the two files of OpenAI's GPT-2 release. Throws naming the file when one is missing
  // or malformed (a merge whose parts or result are not in the vocabulary, no "<|endoftext|>").
  static Gpt2Tokenizer load(const std::filesystem::path& encoder_json,
                            const std::filesystem::path& vocab_bpe);
  // dir/encoder.json and dir/vocab.bpe.
  static Gpt2Tokenizer load_dir(const std::filesystem::path& dir);

  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;
  ~Gpt2Tokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override;
  int32_t eot_token() const override;  // "<|endoftext|>"'s id: kEndOfText for OpenAI's files
  std::string name() const override { return "gpt2"; }

  // The raw bytes token `id` stands for (not the byte-to-unicode form of encoder.json).
  const std::string& token_bytes(int32_t id) const;

 private:
  struct Impl;
  explicit Gpt2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::data
