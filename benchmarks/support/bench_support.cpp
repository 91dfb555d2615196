// Flags, synthetic token shards and private temp folders for the benchmarks.
#include "bench_support.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/generator.h"
#include "braid/data/token_shard.h"

namespace braid::bench {

Usage bench_usage(const std::string& program, const std::string& summary,
                  const std::string& example, const std::vector<FlagSpec>& flags) {
  Usage usage{.program = program, .synopsis = "[--FLAG VALUE]...", .summary = summary};
  for (const FlagSpec& f : flags) {
    const std::string default_text = f.default_value.empty() ? "none" : f.default_value;
    usage.flags.push_back({"--" + f.key, f.value_name, f.help + "; default " + default_text});
  }
  usage.example = example;
  return usage;
}

Flags parse_flags(const Usage& usage, const std::vector<FlagSpec>& flags, int argc, char** argv) {
  Flags values;
  for (const FlagSpec& f : flags) values[f.key] = f.default_value;
  for (const auto& [name, value] : parse_command_line(usage, {argv + 1, argv + argc}).flags)
    values[name.substr(2)] = value;
  return values;
}

void write_random_tokens(const std::filesystem::path& dir, int64_t vocab, int64_t count) {
  std::filesystem::create_directories(dir);
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(std::min<int64_t>(
        vocab - 1, static_cast<int64_t>(uniform_at(7, 1, i) * static_cast<float>(vocab))));
  data::write_token_shard(dir / "train_000.bin", std::span<const int32_t>(tokens));
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// An argument as a POSIX shell reads it back: bare when it holds only safe characters.
std::string shell_quoted(const std::string& arg) {
  const bool safe = !arg.empty() && arg.find_first_not_of(
                                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-+=/.,:@%") == std::string::npos;
  if (safe) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown (no model name in /proc/cpuinfo)";
}

}  // namespace

RunFacts run_facts(int argc, char** argv) {
  RunFacts f;
  if (const char* wrapper = std::getenv("BRAID_BENCH_COMMAND"); wrapper && *wrapper) {
    f.command = wrapper;
  } else {
    for (int i = 0; i < argc; ++i) f.command += (i ? " " : "") + shell_quoted(argv[i]);
  }
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  f.date = date;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) f.host = host;
  f.cpu = cpu_model();
  f.threads = omp_get_max_threads();
  return f;
}

nlohmann::json run_facts_json(int argc, char** argv) {
  const RunFacts f = run_facts(argc, argv);
  return {{"command", f.command},
          {"date", f.date},
          {"host", f.host},
          {"cpu", f.cpu},
          {"threads", f.threads}};
}

std::filesystem::path private_temp_folder(const std::string& prefix, int rank) {
  return std::filesystem::temp_directory_path() /
         (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(rank));
}

}  // namespace braid::bench
