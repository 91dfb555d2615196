// braid_simt_translate: turns a CUDA source into host C++ for the SIMT emulator (rewrite.h), and
// every header it includes that (transitively) needs the same, mirrored under --header-dir.
//
//   braid_simt_translate --output OUT.cpp [--header-dir DIR] [--depfile FILE] [-I DIR]... IN.cu
//
// Quoted includes are resolved as the compiler would (the including file's directory, then the
// -I directories), angled ones against the -I directories only; a resolved header that needs
// translation is included from its translated copy, any other resolved quoted include by its
// absolute path (the output does not sit next to the source). Outputs start with a #line naming
// the original, and are rewritten only when their content changes.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "rewrite.h"

namespace fs = std::filesystem;
using braid::simt::translate::IncludeRef;

namespace {

struct Options {
  fs::path input, output, header_dir, depfile;
  std::vector<fs::path> include_dirs;
};

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes through a temporary and a rename, and not at all when the content is unchanged, so
// parallel translations sharing a header never see a half-written one and builds stay incremental.
bool write_if_changed(const fs::path& path, const std::string& text) {
  if (std::optional<std::string> old = read_file(path); old && *old == text) return true;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return false;
    out << text;
    if (!out) return false;
  }
  fs::rename(tmp, path, ec);
  return !ec;
}

std::string quoted_path(const fs::path& p) {
  std::string out;
  for (char c : p.string()) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

class Translator {
 public:
  explicit Translator(Options options) : options_(std::move(options)) {}

  int run() {
    const fs::path input = fs::absolute(options_.input).lexically_normal();
    std::optional<std::string> source = read_file(input);
    if (!source) {
      std::cerr << input.string() << ": error: cannot read\n";
      return 1;
    }
    read_.insert(input);
    std::optional<std::string> text = translate(input, *source);
    if (!text) return 1;
    if (!write_if_changed(options_.output, *text)) {
      std::cerr << options_.output.string() << ": error: cannot write\n";
      return 1;
    }
    if (!options_.depfile.empty()) {
      std::string deps = escape(options_.output.string()) + ":";
      for (const fs::path& p : read_) deps += " \\\n  " + escape(p.string());
      deps += "\n";
      if (!write_if_changed(options_.depfile, deps)) return 1;
    }
    return 0;
  }

 private:
  static std::string escape(const std::string& path) {
    std::string out;
    for (char c : path) {
      if (c == ' ' || c == '#') out += '\\';
      if (c == '$') out += '$';
      out += c;
    }
    return out;
  }

  // Where `ref`, included from `from`, resolves; nullopt when not found in our directories.
  std::optional<fs::path> resolve(const IncludeRef& ref, const fs::path& from, bool* local) const {
    *local = false;
    std::error_code ec;
    if (!ref.angled) {
      const fs::path candidate = (from.parent_path() / ref.path).lexically_normal();
      if (fs::is_regular_file(candidate, ec)) {
        *local = true;
        return candidate;
      }
    }
    for (const fs::path& dir : options_.include_dirs) {
      const fs::path candidate = (fs::absolute(dir) / ref.path).lexically_normal();
      if (fs::is_regular_file(candidate, ec)) return candidate;
    }
    return std::nullopt;
  }

  // Whether `path` or anything it includes (within our directories) uses the rewritten syntax.
  bool needs_translation(const fs::path& path) {
    if (auto it = needs_.find(path); it != needs_.end()) return it->second;
    needs_[path] = false;  // breaks include cycles
    std::optional<std::string> text = read_file(path);
    if (!text) return false;
    read_.insert(path);
    bool needs = braid::simt::translate::has_cuda_syntax(*text);
    for (const IncludeRef& ref : braid::simt::translate::includes_of(*text)) {
      if (needs) break;
      bool local = false;
      if (std::optional<fs::path> target = resolve(ref, path, &local))
        needs = needs_translation(*target);
    }
    needs_[path] = needs;
    return needs;
  }

  fs::path translated_path(const fs::path& header) const {
    return options_.header_dir / header.relative_path();
  }

  // The translated text of `path`; translated headers it includes are written on the way.
  std::optional<std::string> translate(const fs::path& path, const std::string& source) {
    bool failed = false;
    const auto rewrite_include = [&](const IncludeRef& ref) -> std::optional<std::string> {
      bool local = false;
      std::optional<fs::path> target = resolve(ref, path, &local);
      if (!target) return std::nullopt;
      if (needs_translation(*target)) {
        if (options_.header_dir.empty()) {
          std::cerr << path.string() << ": error: " << target->string()
                    << " needs translation; pass --header-dir\n";
          failed = true;
          return std::nullopt;
        }
        if (!translate_header(*target)) failed = true;
        return "#include \"" + quoted_path(translated_path(*target)) + "\"";
      }
      if (local && !ref.angled) return "#include \"" + quoted_path(*target) + "\"";
      return std::nullopt;
    };
    braid::simt::translate::RewriteResult result =
        braid::simt::translate::rewrite_source(source, rewrite_include);
    for (const std::string& e : result.errors) {
      // "line N: message" -> "path:N: error: message"
      const size_t colon = e.find(':');
      std::cerr << path.string() << ":" << e.substr(5, colon - 5)
                << ": error:" << e.substr(colon + 1) << "\n";
      failed = true;
    }
    if (failed) return std::nullopt;
    return "#line 1 \"" + quoted_path(path) + "\"\n" + result.text;
  }

  bool translate_header(const fs::path& header) {
    if (done_.count(header)) return true;
    done_.insert(header);
    std::optional<std::string> source = read_file(header);
    if (!source) return false;
    std::optional<std::string> text = translate(header, *source);
    if (!text) return false;
    if (!write_if_changed(translated_path(header), *text)) {
      std::cerr << translated_path(header).string() << ": error: cannot write\n";
      return false;
    }
    return true;
  }

  Options options_;
  std::map<fs::path, bool> needs_;
  std::set<fs::path> done_;
  std::set<fs::path> read_;
};

int usage() {
  std::cerr << "usage: braid_simt_translate --output OUT.cpp [--header-dir DIR] "
               "[--depfile FILE] [-I DIR]... INPUT.cu\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](fs::path* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (arg == "--output") {
      if (!value(&options.output)) return usage();
    } else if (arg == "--header-dir") {
      if (!value(&options.header_dir)) return usage();
      options.header_dir = fs::absolute(options.header_dir);
    } else if (arg == "--depfile") {
      if (!value(&options.depfile)) return usage();
    } else if (arg == "-I") {
      fs::path dir;
      if (!value(&dir)) return usage();
      options.include_dirs.push_back(dir);
    } else if (arg.rfind("-I", 0) == 0) {
      options.include_dirs.emplace_back(arg.substr(2));
    } else if (!arg.empty() && arg[0] != '-' && options.input.empty()) {
      options.input = arg;
    } else {
      return usage();
    }
  }
  if (options.input.empty() || options.output.empty()) return usage();
  return Translator(std::move(options)).run();
}
