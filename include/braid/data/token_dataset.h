// A training or validation set: an ordered list of token shards opened together.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "braid/data/token_shard.h"

namespace braid::data {

// Shards in a fixed order (the order given, or sorted by name for a glob) so that every rank
// and every restart sees the same token stream. Copies share the mappings and are cheap.
class TokenDataset {
 public:
  // Opens every file; throws when the list is empty or any shard is invalid.
  explicit TokenDataset(const std::vector<std::filesystem::path>& files);

  // `pattern` is a shell glob such as "data/kjv/kjv_train_*.bin" (a plain path also works).
  // Matches are sorted bytewise. Throws when nothing matches.
  static TokenDataset from_pattern(const std::string& pattern);

  size_t num_shards() const { return shards_.size(); }
  const TokenShard& shard(size_t i) const { return shards_.at(i); }
  const std::vector<TokenShard>& shards() const { return shards_; }
  int64_t total_tokens() const { return total_tokens_; }

  // Checks every id against the model's vocabulary; the error names file, position and id.
  void validate_ids(int64_t vocab_size) const;

 private:
  std::vector<TokenShard> shards_;
  int64_t total_tokens_ = 0;
};

}  // namespace braid::data
