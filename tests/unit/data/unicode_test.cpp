// Tests for first_invalid_utf8: valid text of every sequence length, and each kind of malformed
// sequence found at its exact offset.
#include <gtest/gtest.h>

#include <string>

#include "braid/data/unicode.h"

namespace braid::data {
namespace {

TEST(FirstInvalidUtf8, AcceptsValidText) {
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("plain ASCII\n\t"), std::nullopt);
  // One character of each length, including the largest code point and the ones around the
  // surrogate block.
  EXPECT_EQ(first_invalid_utf8("é 日 🍕 \xF4\x8F\xBF\xBF \xED\x9F\xBF \xEE\x80\x80"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8(std::string("nul \0 inside", 12)), std::nullopt);
}

TEST(FirstInvalidUtf8, FindsTheFirstMalformedSequence) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"\x80", 0},              // a continuation byte with no lead
      {"ab\xFF", 2},            // never valid in UTF-8
      {"abc\xC3", 3},           // truncated at the end
      {"x\xC3(y", 1},           // lead byte followed by a non-continuation
      {"\xC0\xAF", 0},          // overlong '/'
      {"\xE0\x80\xAF", 0},      // overlong, 3 bytes
      {"ok \xED\xA0\x80", 3},   // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"é\xE6\x97", 2},         // truncated 3-byte sequence after a valid 2-byte one
      {"日本\x80語\xFF", 6},    // the first of two bad bytes
  };
  for (const Case& c : cases) {
    EXPECT_EQ(first_invalid_utf8(c.text), c.offset) << "in \"" << c.text << "\"";
  }
}

}  // namespace
}  // namespace braid::data
