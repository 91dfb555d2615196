// Tokenizer: the text <-> token id interface, the byte-level tokenizer, and a by-name factory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace braid::data {

// Text is a UTF-8 byte string; encode/decode are lossless for every byte string a tokenizer
// covers (both shipped ones cover all). encode() treats "<|endoftext|>" in the text as plain
// characters: document boundaries are marked by appending eot_token() explicitly, so user text
// can never inject one. Implementations are safe to call from several threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws naming the offending position when an id is outside [0, vocab_size()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eot_token() const = 0;  // end of text: separates documents
  virtual std::string name() const = 0;   // "gpt2", "byte"
};

// Ids 0..255 are the bytes themselves; 256 is end-of-text. Vocabulary 257.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 256;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;  // EOT -> "<|endoftext|>"
  int64_t vocab_size() const override { return 257; }
  int32_t eot_token() const override { return kEndOfText; }
  std::string name() const override { return "byte"; }
};

// "byte" or "gpt2"; for gpt2, `vocab_dir` holds encoder.json and vocab.bpe
// (scripts/fetch_gpt2_vocab.sh puts them in data/gpt2/). Throws on an unknown name.
std::unique_ptr<Tokenizer> make_tokenizer(std::string_view name,
                                          const std::filesystem::path& vocab_dir = {});

}  // namespace braid::data
