// Flags, synthetic token shards and private temp folders for the benchmarks.
#include "bench_support.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/generator.h"
#include "braid/data/token_shard.h"

namespace braid::bench {

Flags parse_flags(int argc, char** argv, Flags defaults) {
  std::string known;
  for (const auto& [key, value] : defaults) known += " --" + key;
  for (int i = 1; i < argc; i += 2) {
    const std::string arg = argv[i];
    const std::string key = arg.rfind("--", 0) == 0 ? arg.substr(2) : "";
    BRAID_CHECK(defaults.count(key) && i + 1 < argc,
                "unknown flag or missing value: '{}' (flags take a value; known:{})", arg, known);
    defaults[key] = argv[i + 1];
  }
  return defaults;
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

std::filesystem::path private_temp_folder(const std::string& prefix, int rank) {
  return std::filesystem::temp_directory_path() /
         (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(rank));
}

}  // namespace braid::bench
