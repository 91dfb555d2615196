// One file of training tokens in llm.c's `.bin` format, memory-mapped read-only, and its writer.
//
// Layout: a header of 256 little-endian int32 (header[0] = kShardMagic, header[1] =
// kShardVersion, header[2] = number of tokens, the rest zero) followed by that many uint16
// token ids. The format is llm.c's, so shards made by its Python scripts load here and the
// other way round.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "braid/core/storage.h"

namespace braid::data {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;  // llm.c's version 2 holds uint32 ids (not supported)
inline constexpr int64_t kShardHeaderInts = 256;
inline constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;
inline constexpr int64_t kMaxShardTokenId = 65535;  // ids are stored as uint16

// A validated, memory-mapped token file. Copies share one mapping, which is unmapped when the
// last copy (or a Tensor built on storage()) goes away. Pages are loaded lazily by the OS, so
// opening a multi-GB shard is cheap.
class TokenShard {
 public:
  // Maps `path` and checks the header against the file size. Throws braid::Error naming the
  // path when the file is missing, shorter than the header, has the wrong magic or version,
  // or holds more or fewer bytes than its token count says.
  explicit TokenShard(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  int64_t size() const { return size_; }  // number of tokens
  std::span<const uint16_t> tokens() const { return {tokens_, static_cast<size_t>(size_)}; }
  uint16_t operator[](int64_t i) const { return tokens_[i]; }
  // The whole mapped file (header included); the tokens start kShardHeaderBytes in.
  const StoragePtr& storage() const { return storage_; }

  // Throws naming this file, the position and the id when some id is >= vocab_size.
  void validate_ids(int64_t vocab_size) const;

 private:
  std::filesystem::path path_;
  StoragePtr storage_;
  const uint16_t* tokens_ = nullptr;
  int64_t size_ = 0;
};

// Writes `tokens` as a shard at `path`, atomically: the data goes to a temporary file in the
// same folder, is fsync'ed, then renamed over `path`, so a reader never sees half a shard.
// Creates missing parent folders. The int32 overload rejects ids outside [0, 65535].
void write_token_shard(const std::filesystem::path& path, std::span<const uint16_t> tokens);
void write_token_shard(const std::filesystem::path& path, std::span<const int32_t> tokens);

}  // namespace braid::data
