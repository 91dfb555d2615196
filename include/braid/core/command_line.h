// The command line of braid's binaries: one usage/help format, a flag parser, and UsageError.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "braid/core/error.h"

namespace braid {

// A mistake on the command line (unknown flag, flag without its value, wrong argument count).
// Binaries catch it apart from other errors: print_usage_error, then exit kUsageExitCode.
class UsageError : public Error {
 public:
  using Error::Error;
};

// The exit status of a command-line mistake, as for most Unix tools (bash, getopt users).
inline constexpr int kUsageExitCode = 2;

// One line of help: a flag ("--steps" taking value "N") or a positional argument ("TEXT_FILE").
struct ArgHelp {
  std::string name;
  std::string value;      // the flag's value placeholder; empty for a switch or a positional
  std::string help;       // one line
  bool required = false;  // must be given; required positionals come before optional ones
};

// Everything --help prints. text() lays it out as
//   usage: <program> <synopsis>
//   <summary>
//   arguments / flags (one line each; -h, --help added)
//   example: <example>
//   <notes>
struct Usage {
  std::string program;
  std::string synopsis;            // may span lines, each continued under the first
  std::string summary;             // what the binary does, one or two sentences
  std::vector<ArgHelp> arguments;  // positional arguments, in order
  std::vector<ArgHelp> flags;
  std::string example;  // one complete command line
  std::string notes;    // e.g. where the training config's schema is documented

  std::string text() const;
};

// The parsed command line: flags in the order given (a repeated flag appears each time, as
// --set does) and positional arguments.
struct CommandLine {
  std::vector<std::pair<std::string, std::string>> flags;  // (name, value); "" for a switch
  std::vector<std::string> arguments;
  bool help = false;  // -h or --help was given: nothing else was checked

  bool has(std::string_view name) const;
  // The last value given for `name`, if any.
  std::optional<std::string> value(std::string_view name) const;
  std::string value_or(std::string_view name, const std::string& fallback) const;
};

// Parses `args` (argv without argv[0]) against `usage`. Flags are "--name value",
// "--name=value", or "--name" for a switch; "--" ends the flags. -h/--help anywhere but as a
// flag's value returns help = true. Otherwise throws UsageError naming the first bad argument:
// a flag not in usage.flags, a flag missing its value, a value given to a switch, more
// positional arguments than usage.arguments, or a required flag or argument left out.
CommandLine parse_command_line(const Usage& usage, const std::vector<std::string>& args);

// `text`, the value of `flag`, as a whole number or a number: throws UsageError naming the flag
// and the text when it is not one (or has anything after it), instead of std::stoi's "stoi".
int64_t parse_integer(std::string_view flag, const std::string& text);
double parse_number(std::string_view flag, const std::string& text);

// The first thing main() does when it reads its flags elsewhere (config_from_args): parses
// argv as above; returns nullopt to go on, or the exit status after print_help (0) or
// print_usage_error (kUsageExitCode).
std::optional<int> answer_help_or_usage_error(const Usage& usage, int argc, char** argv);

// Prints usage.text() to stdout; returns 0, the exit status of --help.
int print_help(const Usage& usage);
// Prints "<program>: error: <message>" and then usage.text() to stderr; returns kUsageExitCode.
int print_usage_error(const Usage& usage, const std::exception& error);

}  // namespace braid
