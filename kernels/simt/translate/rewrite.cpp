// The translator's two rewrites (rewrite.h):
//   name<<<grid, block[, smem[, stream]]>>>(args)
//     -> ::braid::simt::launch(name, "name", grid, block[, smem[, stream]])(args)
//   [static|volatile|__align__(n)|alignas(n)] __shared__ T a[N][M], b[K];
//     -> static ::braid::simt::SharedSlot slot_a; auto& a = static_shared<T[N][M], n>(slot_a, ...);
//        (the same for b)
//   extern __shared__ T name[];
//     -> T* const name = ::braid::simt::dynamic_shared<T>("name");
//   __noinline__ -> __attribute__((noinline))
// Replacements stay on the line where the construct starts and the construct's newlines follow
// them, so every later line keeps its number.
#include "rewrite.h"

#include <algorithm>
#include <map>
#include <string>

#include "scanner.h"

namespace braid::simt::translate {
namespace {

struct Edit {
  size_t begin, end;
  std::string text;
};

class Rewriter {
 public:
  Rewriter(std::string_view source, const IncludeRewriter& includes)
      : s_(source), tokens_(scan(source)), includes_(includes) {}

  RewriteResult run() {
    track_scopes_and_rewrite();
    std::sort(edits_.begin(), edits_.end(),
              [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
    RewriteResult result;
    size_t at = 0;
    for (const Edit& e : edits_) {
      if (e.begin < at) continue;  // overlapping (cannot happen for valid input)
      result.text.append(s_.substr(at, e.begin - at));
      result.text += e.text;
      at = e.end;
    }
    result.text.append(s_.substr(at));
    result.errors = std::move(errors_);
    return result;
  }

 private:
  std::string_view text(size_t t) const {
    return s_.substr(tokens_[t].begin, tokens_[t].end - tokens_[t].begin);
  }
  bool is(size_t t, std::string_view what) const { return t < tokens_.size() && text(t) == what; }
  bool punct(size_t t, char c) const {
    return t < tokens_.size() && tokens_[t].kind == TokenKind::punct && s_[tokens_[t].begin] == c;
  }
  bool touching(size_t a, size_t b) const { return tokens_[a].end == tokens_[b].begin; }
  bool triple(size_t t, char c) const {
    return punct(t, c) && punct(t + 1, c) && punct(t + 2, c) && touching(t, t + 1) &&
           touching(t + 1, t + 2);
  }
  bool identifier(size_t t) const {
    return t < tokens_.size() && tokens_[t].kind == TokenKind::identifier;
  }
  void error(size_t t, const std::string& message) {
    errors_.push_back("line " + std::to_string(line_of(s_, tokens_[t].begin)) + ": " + message);
  }
  std::string newlines_in(size_t begin, size_t end) const {
    return std::string(static_cast<size_t>(std::count(s_.begin() + static_cast<long>(begin),
                                                      s_.begin() + static_cast<long>(end), '\n')),
                       '\n');
  }
  // The tokens [a, b) as one line of text: whatever separated two tokens (spaces, a newline, a
  // comment) becomes one space ("float[32]", "Tile<T, 4>", "kThreads - 1").
  std::string compact(size_t a, size_t b) const {
    std::string out;
    for (size_t t = a; t < b; ++t) {
      if (t > a && tokens_[t].begin > tokens_[t - 1].end) out += ' ';
      out += text(t);
    }
    return out;
  }

  // One pass over the tokens: brace scopes (to refuse namespace-scope __shared__), launches,
  // __shared__ declarations and includes.
  void track_scopes_and_rewrite() {
    std::vector<bool> namespace_scope;  // per open brace: does it open a namespace (or extern "C")
    for (size_t t = 0; t < tokens_.size(); ++t) {
      const Token& tok = tokens_[t];
      if (tok.kind == TokenKind::directive) {
        rewrite_directive(t);
        continue;
      }
      if (punct(t, '{')) {
        namespace_scope.push_back(opens_namespace(t));
      } else if (punct(t, '}')) {
        if (!namespace_scope.empty()) namespace_scope.pop_back();
      } else if (triple(t, '<')) {
        t = rewrite_launch(t);
      } else if (is(t, "__noinline__") && identifier(t) && !punct(t - 1, '(')) {
        // CUDA's keyword (not GCC's attribute name inside __attribute__((...))).
        edits_.push_back({tok.begin, tok.end, "__attribute__((noinline))"});
      } else if (is(t, "__shared__") && identifier(t)) {
        const bool at_namespace_scope =
            std::all_of(namespace_scope.begin(), namespace_scope.end(), [](bool n) { return n; });
        t = rewrite_shared(t, at_namespace_scope);
      }
    }
  }

  // `namespace a::b {`, `namespace {`, `inline namespace x {`, `extern "C" {`.
  bool opens_namespace(size_t brace) const {
    size_t t = brace;
    while (t > 0 && (identifier(t - 1) || punct(t - 1, ':'))) {
      --t;
      if (is(t, "namespace")) return true;
    }
    return brace > 1 && tokens_[brace - 1].kind == TokenKind::literal && is(brace - 2, "extern");
  }

  // ---- launches --------------------------------------------------------------------------------

  // Index of the '<' matching the '>' at `close`, scanning back, or npos.
  size_t matching_angle_back(size_t close) const {
    int depth = 0;
    for (size_t t = close + 1; t-- > 0;) {
      if (punct(t, '>')) ++depth;
      if (punct(t, '<') && --depth == 0) return t;
      if (punct(t, ';') || punct(t, '{') || punct(t, '}')) break;
    }
    return std::string_view::npos;
  }

  size_t rewrite_launch(size_t open) {
    // The kernel: [::] (name [<args>] ::)* [template] name [<args>], ending right before <<<.
    size_t first = open;
    size_t t = open;
    while (t > 0) {
      size_t end = t - 1;
      if (punct(end, '>')) {
        const size_t lt = matching_angle_back(end);
        if (lt == std::string_view::npos || lt == 0) break;
        end = lt - 1;
      }
      if (!identifier(end)) break;
      first = end;
      t = end;
      if (t > 0 && is(t - 1, "template")) first = t = t - 1;
      if (t >= 2 && punct(t - 1, ':') && punct(t - 2, ':') && touching(t - 2, t - 1)) {
        first = t = t - 2;
        continue;
      }
      break;
    }
    if (first == open) {
      error(open, "<<< without a kernel name before it");
      return open + 2;
    }
    // The matching >>> at bracket depth 0.
    int depth = 0;
    size_t close = std::string_view::npos;
    for (size_t u = open + 3; u < tokens_.size(); ++u) {
      if (punct(u, '(') || punct(u, '[') || punct(u, '{')) ++depth;
      if (punct(u, ')') || punct(u, ']') || punct(u, '}')) --depth;
      if (depth < 0 || punct(u, ';')) break;
      if (depth == 0 && triple(u, '>')) {
        close = u;
        break;
      }
    }
    if (close == std::string_view::npos || !punct(close + 3, '(')) {
      error(open, "a kernel launch needs <<<configuration>>>(arguments)");
      return open + 2;
    }
    const std::string name = compact(first, open);
    edits_.push_back({tokens_[first].begin, tokens_[first].begin, "::braid::simt::launch("});
    edits_.push_back({tokens_[open].begin, tokens_[open + 2].end, ", \"" + name + "\", "});
    edits_.push_back({tokens_[close].begin, tokens_[close + 2].end, ")"});
    return close + 2;
  }

  // ---- __shared__ ------------------------------------------------------------------------------

  // An alignment attribute starting at t (alignas(N), __align__(N)): its value text, the index
  // after it.
  bool alignment_at(size_t t, std::string* value, size_t* next) const {
    if (!(is(t, "alignas") || is(t, "__align__")) || !punct(t + 1, '(')) return false;
    int depth = 0;
    for (size_t u = t + 1; u < tokens_.size(); ++u) {
      if (punct(u, '(')) ++depth;
      if (punct(u, ')') && --depth == 0) {
        *value = compact(t + 2, u);
        *next = u + 1;
        return true;
      }
    }
    return false;
  }

  size_t rewrite_shared(size_t shared, bool at_namespace_scope) {
    // Specifiers before __shared__ belong to the declaration.
    size_t begin = shared;
    bool is_extern = false;
    std::string align;
    std::vector<size_t> type_prefix;  // cv-qualifiers written before __shared__
    for (size_t t = shared; t > 0;) {
      const size_t p = t - 1;
      if (is(p, "static") || is(p, "__device__")) {
        begin = t = p;
      } else if (is(p, "extern")) {
        is_extern = true;
        begin = t = p;
      } else if (is(p, "volatile") || is(p, "const")) {
        type_prefix.insert(type_prefix.begin(), p);
        begin = t = p;
      } else if (punct(p, ')')) {
        // alignas(N) / __align__(N) before __shared__
        int depth = 0;
        size_t u = p + 1;
        while (u-- > 0) {
          if (punct(u, ')')) ++depth;
          if (punct(u, '(') && --depth == 0) break;
        }
        if (u == 0 || !(is(u - 1, "alignas") || is(u - 1, "__align__"))) break;
        size_t next = 0;
        alignment_at(u - 1, &align, &next);
        begin = t = u - 1;
      } else {
        break;
      }
    }
    // The declaration runs to the ';' at depth 0.
    size_t end = shared + 1;
    int depth = 0;
    for (; end < tokens_.size(); ++end) {
      if (punct(end, '(') || punct(end, '[') || punct(end, '{')) ++depth;
      if (punct(end, ')') || punct(end, ']') || punct(end, '}')) --depth;
      if (depth == 0 && punct(end, ';')) break;
      if (depth < 0) break;
    }
    if (end >= tokens_.size() || !punct(end, ';')) {
      error(shared, "cannot find the end (;) of this __shared__ declaration");
      return shared;
    }
    if (at_namespace_scope) {
      error(shared,
            "__shared__ at namespace scope is not supported by the SIMT translator: declare the "
            "array inside the kernel or device function");
      return end;
    }
    // Tokens after __shared__: more specifiers, the type, declarators, maybe attributes.
    std::vector<size_t> body;
    for (size_t t = shared + 1; t < end;) {
      std::string value;
      size_t next = 0;
      if (alignment_at(t, &value, &next)) {
        align = value;
        t = next;
        continue;
      }
      if (is(t, "static") || is(t, "extern") || is(t, "__device__")) {
        if (is(t, "extern")) is_extern = true;
        ++t;
        continue;
      }
      if (is(t, "__attribute__") && punct(t + 1, '(')) {
        // __attribute__((aligned(N))) keeps N; other attributes are dropped.
        int d = 0;
        size_t u = t + 1;
        for (; u < end; ++u) {
          if (punct(u, '(')) ++d;
          if (punct(u, ')') && --d == 0) break;
        }
        for (size_t a = t + 2; a + 2 < u; ++a)
          if (is(a, "aligned") && punct(a + 1, '(')) {
            size_t c = a + 2;
            while (c < u && !punct(c, ')')) ++c;
            align = compact(a + 2, c);
          }
        t = u + 1;
        continue;
      }
      if (punct(t, '=')) {
        error(t, "a __shared__ variable cannot have an initializer");
        return end;
      }
      body.push_back(t);
      ++t;
    }
    // Split the declarators at commas outside brackets and template arguments.
    std::vector<std::vector<size_t>> declarators(1);
    int brackets = 0, angles = 0;
    for (size_t t : body) {
      if (punct(t, '[') || punct(t, '(')) ++brackets;
      if (punct(t, ']') || punct(t, ')')) --brackets;
      if (brackets == 0 && punct(t, '<')) ++angles;
      if (brackets == 0 && punct(t, '>')) --angles;
      if (brackets == 0 && angles == 0 && punct(t, ',')) {
        declarators.emplace_back();
        continue;
      }
      declarators.back().push_back(t);
    }
    // The first declarator carries the type: its name is the identifier before the first '['
    // at depth 0 (or its last identifier).
    std::vector<size_t>& head = declarators.front();
    size_t name_pos = head.size();
    for (size_t i = 0; i < head.size(); ++i)
      if (punct(head[i], '[')) {
        name_pos = i;
        break;
      }
    if (name_pos == 0 || name_pos > head.size() || !identifier(head[name_pos - 1])) {
      error(shared, "cannot find the variable name in this __shared__ declaration");
      return end;
    }
    if (--name_pos == 0) {
      error(shared, "this __shared__ declaration has no type");
      return end;
    }
    std::string type;
    for (size_t t : type_prefix) type += std::string(text(t)) + " ";
    type += compact(head.front(), head[name_pos]);
    std::string replacement;
    for (size_t d = 0; d < declarators.size(); ++d) {
      const std::vector<size_t>& decl = declarators[d];
      const size_t first = d == 0 ? name_pos : 0;
      if (decl.size() <= first || !identifier(decl[first])) {
        error(shared, "this __shared__ declarator is not `name` or `name[...]`");
        return end;
      }
      const std::string name(text(decl[first]));
      const std::string dims =
          decl.size() > first + 1 ? compact(decl[first + 1], decl.back() + 1) : std::string();
      for (size_t i = first + 1; i < decl.size(); ++i)
        if (punct(decl[i], '*') || punct(decl[i], '&')) {
          error(shared, "pointer declarators after the first are not supported in __shared__");
          return end;
        }
      if (is_extern) {
        if (dims != "[]") {
          error(shared, "extern __shared__ must declare an unsized array: `extern __shared__ T " +
                            name + "[];`");
          return end;
        }
        replacement += type + "* const " + name + " = ::braid::simt::dynamic_shared<" + type +
                       ">(\"" + name + "\"); ";
        continue;
      }
      const std::string slot = "braid_simt_shared_slot_" + std::to_string(++slots_) + "_";
      const std::string full_type = type + dims;
      std::string quoted;
      for (char c : full_type) {
        if (c == '"' || c == '\\') quoted += '\\';
        quoted += c;
      }
      replacement += "static ::braid::simt::SharedSlot " + slot + "; auto& " + name +
                     " = ::braid::simt::static_shared<" + full_type +
                     (align.empty() ? std::string() : ", " + align) + ">(" + slot + ", \"" + name +
                     "\", \"" + quoted + "\"); ";
    }
    if (!replacement.empty()) replacement.pop_back();
    const size_t from = tokens_[begin].begin, to = tokens_[end].end;
    edits_.push_back({from, to, replacement + newlines_in(from, to)});
    return end;
  }

  // ---- includes --------------------------------------------------------------------------------

  void rewrite_directive(size_t t) {
    const std::string_view d = text(t);
    std::optional<IncludeRef> ref = parse_include(d);
    if (!ref || !includes_) return;
    if (std::optional<std::string> replacement = includes_(*ref))
      edits_.push_back({tokens_[t].begin, tokens_[t].end,
                        *replacement + newlines_in(tokens_[t].begin, tokens_[t].end)});
  }

 public:
  static std::optional<IncludeRef> parse_include(std::string_view d) {
    size_t i = 1;  // after '#'
    while (i < d.size() && (d[i] == ' ' || d[i] == '\t')) ++i;
    if (d.substr(i, 7) != "include") return std::nullopt;
    i += 7;
    while (i < d.size() && (d[i] == ' ' || d[i] == '\t')) ++i;
    if (i >= d.size() || (d[i] != '"' && d[i] != '<')) return std::nullopt;
    const char close = d[i] == '"' ? '"' : '>';
    const size_t e = d.find(close, i + 1);
    if (e == std::string_view::npos) return std::nullopt;
    return IncludeRef{close == '>', std::string(d.substr(i + 1, e - i - 1))};
  }

 private:
  std::string_view s_;
  std::vector<Token> tokens_;
  const IncludeRewriter& includes_;
  std::vector<Edit> edits_;
  std::vector<std::string> errors_;
  int slots_ = 0;
};

}  // namespace

RewriteResult rewrite_source(std::string_view source, const IncludeRewriter& rewrite_include) {
  return Rewriter(source, rewrite_include).run();
}

bool has_cuda_syntax(std::string_view source) {
  const std::vector<Token> tokens = scan(source);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const Token& tok = tokens[t];
    if (tok.kind == TokenKind::identifier &&
        source.substr(tok.begin, tok.end - tok.begin) == "__shared__")
      return true;
    if (tok.kind == TokenKind::punct && source[tok.begin] == '<' && t + 2 < tokens.size() &&
        source[tokens[t + 1].begin] == '<' && source[tokens[t + 2].begin] == '<' &&
        tokens[t + 1].begin == tok.end && tokens[t + 2].begin == tokens[t + 1].end &&
        tokens[t + 1].kind == TokenKind::punct && tokens[t + 2].kind == TokenKind::punct)
      return true;
  }
  return false;
}

std::vector<IncludeRef> includes_of(std::string_view source) {
  std::vector<IncludeRef> out;
  for (const Token& tok : scan(source)) {
    if (tok.kind != TokenKind::directive) continue;
    if (auto ref = Rewriter::parse_include(source.substr(tok.begin, tok.end - tok.begin)))
      out.push_back(*ref);
  }
  return out;
}

}  // namespace braid::simt::translate
