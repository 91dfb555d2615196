// The little Unicode the GPT-2 pretokeniser needs: UTF-8 decoding and letter/number/space classes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace braid::data {

// The classes GPT-2's split pattern distinguishes: \p{L}, \p{N}, \s, and everything else.
enum class CharClass : uint8_t { kOther, kLetter, kNumber, kSpace };

// Letters are general categories Lu Ll Lt Lm Lo, numbers Nd Nl No (Unicode 17, as tabled by
// tests/reference/tokenizer/make_unicode_tables.js), spaces the White_Space property.
CharClass char_class(char32_t cp);

// Marks a byte that does not start a valid UTF-8 sequence; such a byte is one "other" char.
inline constexpr char32_t kInvalidCodepoint = 0xFFFFFFFF;

struct Utf8Char {
  char32_t cp;   // kInvalidCodepoint for malformed input
  uint32_t len;  // bytes consumed, 1..4
};

// Decodes the character starting at text[pos] (pos < text.size()). Overlong forms, surrogates,
// values above U+10FFFF and truncated sequences yield {kInvalidCodepoint, 1}, so arbitrary
// bytes still split into pieces that cover the input exactly.
Utf8Char decode_utf8(std::string_view text, size_t pos);

// The byte offset of the first malformed sequence in `text` (by decode_utf8's rules), or
// nullopt when all of `text` is valid UTF-8. The tokenizers accept any bytes; this is for
// callers that promise UTF-8 text, to reject anything else where it is read.
std::optional<size_t> first_invalid_utf8(std::string_view text);

}  // namespace braid::data
