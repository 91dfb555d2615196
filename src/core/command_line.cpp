// The shared --help layout and flag parser of braid's binaries.
#include "braid/core/command_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace braid {
namespace {

bool is_help(const std::string& arg) {
  return arg == "-h" || arg == "--help";
}

// "--steps N" or "TEXT_FILE": the left column of a help line.
std::string left_column(const ArgHelp& a) {
  return a.value.empty() ? a.name : a.name + " " + a.value;
}

// Lines continue under the first one's text, so a multi-line synopsis or note stays aligned.
std::string indent_continuations(const std::string& text, size_t indent) {
  std::string out;
  for (const char c : text) {
    out += c;
    if (c == '\n') out += std::string(indent, ' ');
  }
  return out;
}

const ArgHelp* find_flag(const Usage& usage, const std::string& name) {
  const auto it = std::find_if(usage.flags.begin(), usage.flags.end(),
                               [&](const ArgHelp& f) { return f.name == name; });
  return it == usage.flags.end() ? nullptr : &*it;
}

}  // namespace

std::string Usage::text() const {
  const ArgHelp help_flag{"-h, --help", "", "print this help and exit"};
  size_t width = left_column(help_flag).size();
  for (const ArgHelp& a : arguments) width = std::max(width, left_column(a).size());
  for (const ArgHelp& f : flags) width = std::max(width, left_column(f).size());
  const auto section = [&](const char* title, const std::vector<ArgHelp>& entries) {
    std::string out = fmt::format("\n{}:\n", title);
    for (const ArgHelp& a : entries)
      out += fmt::format("  {:<{}}  {}\n", left_column(a), width, a.help);
    return out;
  };
  const std::string head = "usage: " + program + " ";
  std::string out = head + indent_continuations(synopsis, head.size()) + "\n";
  if (!summary.empty()) out += "\n" + summary + "\n";
  if (!arguments.empty()) out += section("arguments", arguments);
  std::vector<ArgHelp> all_flags = flags;
  all_flags.push_back(help_flag);
  out += section("flags", all_flags);
  if (!example.empty()) out += "\nexample:\n  " + example + "\n";
  if (!notes.empty()) out += "\n" + notes + "\n";
  return out;
}

bool CommandLine::has(std::string_view name) const {
  return value(name).has_value();
}

std::optional<std::string> CommandLine::value(std::string_view name) const {
  for (auto it = flags.rbegin(); it != flags.rend(); ++it)
    if (it->first == name) return it->second;
  return std::nullopt;
}

std::string CommandLine::value_or(std::string_view name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

CommandLine parse_command_line(const Usage& usage, const std::vector<std::string>& args) {
  CommandLine out;
  // The first mistake is kept and thrown only at the end: --help later on still wins.
  std::optional<std::string> mistake;
  const auto note = [&](std::string message) {
    if (!mistake) mistake = std::move(message);
  };
  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_ended || arg.size() < 2 || arg[0] != '-') {
      out.arguments.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    if (is_help(arg)) {
      out.help = true;
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const ArgHelp* flag = find_flag(usage, name);
    if (flag == nullptr) {
      note(fmt::format("unknown argument '{}'", arg));
      continue;
    }
    if (flag->value.empty()) {
      if (eq != std::string::npos) note(fmt::format("{} takes no value, got '{}'", name, arg));
      out.flags.emplace_back(name, "");
    } else if (eq != std::string::npos) {
      out.flags.emplace_back(name, arg.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      out.flags.emplace_back(name, args[++i]);
    } else {
      note(fmt::format("{} needs a value ({} {})", name, name, flag->value));
    }
  }
  if (out.help) return out;
  if (mistake) throw UsageError(*mistake);
  const size_t n = out.arguments.size();
  if (n > usage.arguments.size()) {
    throw UsageError(usage.arguments.empty()
                         ? fmt::format("unexpected argument '{}'", out.arguments.front())
                         : fmt::format("unexpected argument '{}' (at most {} expected)",
                                       out.arguments[usage.arguments.size()],
                                       usage.arguments.size()));
  }
  if (n < usage.arguments.size() && usage.arguments[n].required)
    throw UsageError(fmt::format("missing {}", usage.arguments[n].name));
  for (const ArgHelp& f : usage.flags)
    if (f.required && !out.has(f.name)) throw UsageError("missing " + left_column(f));
  return out;
}

namespace {

// `convert` (std::stoll, std::stod) over the whole of `text`, or a UsageError saying what
// `flag` expects.
template <class Convert>
auto whole_value(std::string_view flag, const std::string& text, const char* expected,
                 Convert convert) {
  size_t used = 0;
  decltype(convert(text, &used)) value{};
  try {
    value = convert(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw UsageError(fmt::format("{} expects {}, got '{}'", flag, expected, text));
  return value;
}

}  // namespace

int64_t parse_integer(std::string_view flag, const std::string& text) {
  return whole_value(flag, text, "a whole number",
                     [](const std::string& t, size_t* used) { return std::stoll(t, used); });
}

double parse_number(std::string_view flag, const std::string& text) {
  return whole_value(flag, text, "a number",
                     [](const std::string& t, size_t* used) { return std::stod(t, used); });
}

std::optional<int> answer_help_or_usage_error(const Usage& usage, int argc, char** argv) {
  try {
    if (parse_command_line(usage, {argv + 1, argv + argc}).help) return print_help(usage);
    return std::nullopt;
  } catch (const UsageError& e) {
    return print_usage_error(usage, e);
  }
}

int print_help(const Usage& usage) {
  std::fputs(usage.text().c_str(), stdout);
  return 0;
}

int print_usage_error(const Usage& usage, const std::exception& error) {
  std::fprintf(stderr, "%s: error: %s\n%s", usage.program.c_str(), error.what(),
               usage.text().c_str());
  return kUsageExitCode;
}

}  // namespace braid
