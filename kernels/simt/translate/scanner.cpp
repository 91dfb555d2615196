// The translator's scanner (scanner.h): comments, string and character literals (raw strings
// included), pp-numbers with digit separators, and directives with line continuations.
#include "scanner.h"

namespace braid::simt::translate {
namespace {

bool identifier_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool identifier_char(char c) {
  return identifier_start(c) || (c >= '0' && c <= '9');
}
bool digit(char c) {
  return c >= '0' && c <= '9';
}

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    bool line_start = true;  // only whitespace since the last newline: '#' starts a directive
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') {
        line_start = true;
        ++i_;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++i_;
        continue;
      }
      if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {  // a line continuation
        i_ += 2;
        continue;
      }
      if (c == '/' && peek(1) == '/') {
        skip_line_comment();
        continue;
      }
      if (c == '/' && peek(1) == '*') {
        skip_block_comment();
        continue;
      }
      const size_t begin = i_;
      if (c == '#' && line_start) {
        skip_directive();
        out.push_back({TokenKind::directive, begin, i_});
        continue;
      }
      line_start = false;
      if (identifier_start(c)) {
        while (i_ < s_.size() && identifier_char(s_[i_])) ++i_;
        // An encoding prefix or R directly followed by a quote belongs to the literal.
        if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'') && literal_prefix(begin, i_)) {
          const bool raw = s_[i_ - 1] == 'R';
          if (raw && s_[i_] == '"')
            skip_raw_string();
          else
            skip_quoted(s_[i_]);
          out.push_back({TokenKind::literal, begin, i_});
        } else {
          out.push_back({TokenKind::identifier, begin, i_});
        }
        continue;
      }
      if (digit(c) || (c == '.' && digit(peek(1)))) {
        skip_number();
        out.push_back({TokenKind::number, begin, i_});
        continue;
      }
      if (c == '"' || c == '\'') {
        skip_quoted(c);
        out.push_back({TokenKind::literal, begin, i_});
        continue;
      }
      ++i_;
      out.push_back({TokenKind::punct, begin, i_});
    }
    return out;
  }

 private:
  char peek(size_t ahead) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }

  bool literal_prefix(size_t begin, size_t end) const {
    const std::string_view p = s_.substr(begin, end - begin);
    return p == "u8" || p == "u" || p == "U" || p == "L" || p == "R" || p == "u8R" || p == "uR" ||
           p == "UR" || p == "LR";
  }

  void skip_line_comment() {
    while (i_ < s_.size() && s_[i_] != '\n') {
      if (s_[i_] == '\\' && peek(1) == '\n') ++i_;  // a continued comment
      ++i_;
    }
  }

  void skip_block_comment() {
    i_ += 2;
    while (i_ < s_.size() && !(s_[i_] == '*' && peek(1) == '/')) ++i_;
    i_ = i_ < s_.size() ? i_ + 2 : s_.size();
  }

  void skip_quoted(char quote) {
    ++i_;
    while (i_ < s_.size() && s_[i_] != quote && s_[i_] != '\n') {
      if (s_[i_] == '\\') ++i_;
      ++i_;
    }
    if (i_ < s_.size() && s_[i_] == quote) ++i_;
  }

  void skip_raw_string() {
    const size_t open = s_.find('(', i_);
    if (open == std::string_view::npos) {
      i_ = s_.size();
      return;
    }
    const std::string closing = ")" + std::string(s_.substr(i_ + 1, open - i_ - 1)) + "\"";
    const size_t close = s_.find(closing, open + 1);
    i_ = close == std::string_view::npos ? s_.size() : close + closing.size();
  }

  // A pp-number: digits, letters, '.', exponent signs, and digit separators (1'000).
  void skip_number() {
    ++i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if ((c == '+' || c == '-') &&
          (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E' || s_[i_ - 1] == 'p' || s_[i_ - 1] == 'P')) {
        ++i_;
      } else if (c == '\'' && identifier_char(peek(1))) {
        i_ += 2;
      } else if (identifier_char(c) || c == '.') {
        ++i_;
      } else {
        break;
      }
    }
  }

  // To the end of the logical line; comments inside may not hide the newline.
  void skip_directive() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') return;
      if (c == '\\' && peek(1) == '\n') {
        i_ += 2;
      } else if (c == '/' && peek(1) == '*') {
        skip_block_comment();
      } else if (c == '/' && peek(1) == '/') {
        skip_line_comment();
      } else if (c == '"' || c == '\'') {
        skip_quoted(c);
      } else {
        ++i_;
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::vector<Token> scan(std::string_view source) {
  return Scanner(source).run();
}

size_t line_of(std::string_view source, size_t offset) {
  size_t line = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i)
    if (source[i] == '\n') ++line;
  return line;
}

}  // namespace braid::simt::translate
