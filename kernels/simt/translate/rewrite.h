// The SIMT translator's rewriting of one source text: kernel launches and __shared__ declarations
// into calls of the emulator, #include lines through a caller-supplied resolver. Everything else
// stays byte for byte, and every line keeps its number.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid::simt::translate {

struct IncludeRef {
  bool angled = false;  // <...> rather than "..."
  std::string path;     // as written
};

// Given an #include, the directive to write instead (e.g. `#include "/abs/path"`), or nullopt
// to keep it.
using IncludeRewriter = std::function<std::optional<std::string>(const IncludeRef&)>;

struct RewriteResult {
  std::string text;
  std::vector<std::string> errors;  // "line N: message"
};

RewriteResult rewrite_source(std::string_view source, const IncludeRewriter& rewrite_include);

// Whether the text itself uses the syntax the translator rewrites (__shared__, <<<).
bool has_cuda_syntax(std::string_view source);

// The #include directives of the text, in order.
std::vector<IncludeRef> includes_of(std::string_view source);

}  // namespace braid::simt::translate
