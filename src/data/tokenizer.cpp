// ByteTokenizer and make_tokenizer, the by-name factory tools and configs use.
#include "braid/data/tokenizer.h"

#include "braid/core/error.h"
#include "braid/data/gpt2_tokenizer.h"

namespace braid::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<uint8_t>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id == kEndOfText) {
      text += "<|endoftext|>";
      continue;
    }
    BRAID_CHECK(id >= 0 && id < 256,
                "cannot decode token id {} at position {}: byte tokenizer ids are 0..255, plus "
                "{} for end-of-text",
                id, i, kEndOfText);
    text.push_back(static_cast<char>(id));
  }
  return text;
}

std::unique_ptr<Tokenizer> make_tokenizer(std::string_view name,
                                          const std::filesystem::path& vocab_dir) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") {
    BRAID_CHECK(!vocab_dir.empty(),
                "the gpt2 tokenizer needs the folder holding encoder.json and vocab.bpe (e.g. "
                "data/gpt2, filled by scripts/fetch_gpt2_vocab.sh), got none");
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load_dir(vocab_dir));
  }
  BRAID_FAIL("unknown tokenizer '{}'; expected 'gpt2' or 'byte'", name);
}

}  // namespace braid::data
