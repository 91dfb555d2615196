// A C++ source scanner for the SIMT translator: splits text into the tokens it needs (identifiers,
// numbers, literals, single-character punctuators, whole preprocessor directives), skipping
// whitespace and comments, and keeps every token's byte range so edits leave the rest intact.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace braid::simt::translate {

enum class TokenKind { identifier, number, literal, punct, directive };

struct Token {
  TokenKind kind;
  size_t begin;  // byte offsets into the source
  size_t end;
};

// Tokens of `source` in order. Punctuators are single characters ("<<<" is three '<' tokens
// with touching ranges). A directive token spans a whole logical line from its '#'.
std::vector<Token> scan(std::string_view source);

// The 1-based line of byte `offset`.
size_t line_of(std::string_view source, size_t offset);

}  // namespace braid::simt::translate
