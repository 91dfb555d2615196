// TokenDataset: opening a list or glob of token shards in a deterministic order.
#include "braid/data/token_dataset.h"

#include <glob.h>

#include <algorithm>

#include "braid/core/error.h"

namespace braid::data {

TokenDataset::TokenDataset(const std::vector<std::filesystem::path>& files) {
  BRAID_CHECK(!files.empty(), "a token dataset needs at least one shard file, got an empty list");
  shards_.reserve(files.size());
  for (const auto& file : files) {
    shards_.emplace_back(file);
    total_tokens_ += shards_.back().size();
  }
}

TokenDataset TokenDataset::from_pattern(const std::string& pattern) {
  BRAID_CHECK(!pattern.empty(),
              "a token dataset needs a file or glob pattern such as 'data/kjv/kjv_train_*.bin', "
              "got an empty string");
  glob_t matches{};
  // GLOB_NOSORT: we sort bytewise below, so the order does not depend on the locale.
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  std::vector<std::filesystem::path> files;
  if (rc == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) files.emplace_back(matches.gl_pathv[i]);
  }
  ::globfree(&matches);
  BRAID_CHECK(rc == 0 || rc == GLOB_NOMATCH, "reading the folders of pattern '{}' failed ({})",
              pattern, rc == GLOB_ABORTED ? "read error" : "out of memory");
  BRAID_CHECK(!files.empty(),
              "no token shards match '{}' (expected one or more llm.c-format .bin files; "
              "examples/gpt/prepare_data.sh makes data/kjv/kjv_train_000.bin)",
              pattern);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.native() < b.native(); });
  return TokenDataset(files);
}

void TokenDataset::validate_ids(int64_t vocab_size) const {
  for (const auto& shard : shards_) shard.validate_ids(vocab_size);
}

}  // namespace braid::data
