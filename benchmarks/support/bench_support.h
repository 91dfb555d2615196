// Shared pieces of the end-to-end benchmarks: "--key value" flags and a synthetic corpus.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "braid/core/command_line.h"

namespace braid::bench {

using Flags = std::map<std::string, std::string>;  // key without "--" -> value

// One flag of a benchmark: "--<key> <value_name>", its default and one line of help.
struct FlagSpec {
  std::string key;
  std::string value_name;
  std::string default_value;
  std::string help;
};

// The --help of a benchmark whose flags all take a value; each help line ends with the default.
Usage bench_usage(const std::string& program, const std::string& summary,
                  const std::string& example, const std::vector<FlagSpec>& flags);

// The flags' defaults, replaced by the values the command line gives. Throws braid::UsageError
// for a mistake (call answer_help_or_usage_error first to answer --help and mistakes).
Flags parse_flags(const Usage& usage, const std::vector<FlagSpec>& flags, int argc, char** argv);

// Writes `count` token ids, uniform below `vocab`, to <dir>/train_000.bin (dir is created).
void write_random_tokens(const std::filesystem::path& dir, int64_t vocab, int64_t count = 200000);

// The median (mean of the middle two for an even count); NaN for none.
double median(std::vector<double> values);

// What docs/performance.md shows of a run: the command (BRAID_BENCH_COMMAND when a wrapper
// script sets it, else argv), the UTC date (ISO 8601), the host, the CPU model and the OpenMP
// threads (per rank).
struct RunFacts {
  std::string command, date, host, cpu;
  int threads = 0;
};
RunFacts run_facts(int argc, char** argv);
// The same as JSON fields: {"command", "date", "host", "cpu", "threads"}.
nlohmann::json run_facts_json(int argc, char** argv);

// A folder of this process and rank under the temp folder: <tmp>/<prefix>_<pid>_<rank>.
std::filesystem::path private_temp_folder(const std::string& prefix, int rank);

}  // namespace braid::bench
