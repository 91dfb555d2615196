// Shared pieces of the end-to-end benchmarks: "--key value" flags and a synthetic corpus.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace braid::bench {

using Flags = std::map<std::string, std::string>;

// Fills `defaults` from "--key value" pairs; an unknown key or a key without a value is an
// error naming the known keys.
Flags parse_flags(int argc, char** argv, Flags defaults);

// Writes `count` token ids, uniform below `vocab`, to <dir>/train_000.bin (dir is created).
void write_random_tokens(const std::filesystem::path& dir, int64_t vocab, int64_t count = 200000);

// The median (mean of the middle two for an even count); NaN for none.
double median(std::vector<double> values);

// A folder of this process and rank under the temp folder: <tmp>/<prefix>_<pid>_<rank>.
std::filesystem::path private_temp_folder(const std::string& prefix, int rank);

}  // namespace braid::bench
