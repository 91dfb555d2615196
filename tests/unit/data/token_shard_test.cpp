// Tests for token shards and datasets: round trips, atomic writes, and every rejected input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/data/token_dataset.h"
#include "braid/data/token_shard.h"
#include "support/test_util.h"

namespace braid::data {
namespace {

namespace fs = std::filesystem;

using braid::testing::contains;
using braid::testing::error_of;

class TokenShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / fmt::format("braid_shard_test_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a valid shard, then lets `edit` corrupt its bytes.
  fs::path corrupted(const std::string& name, const std::vector<uint16_t>& tokens,
                     void (*edit)(std::string&)) {
    const fs::path path = dir_ / name;
    write_token_shard(path, std::span<const uint16_t>(tokens));
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    edit(bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    return path;
  }

  fs::path dir_;
};

void set_header(std::string& bytes, int index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, 4);
}

TEST_F(TokenShardTest, RoundTripKeepsValuesAndCount) {
  const std::vector<uint16_t> tokens = {0, 1, 2, 50256, 65535, 7, 7, 300};
  const fs::path path = dir_ / "shard.bin";
  write_token_shard(path, std::span<const uint16_t>(tokens));

  EXPECT_EQ(fs::file_size(path), static_cast<uintmax_t>(kShardHeaderBytes + 2 * tokens.size()));
  const TokenShard shard(path);
  ASSERT_EQ(shard.size(), static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(std::vector<uint16_t>(shard.tokens().begin(), shard.tokens().end()), tokens);
  EXPECT_EQ(shard[3], 50256);
  EXPECT_EQ(shard.path(), path);

  // The header is llm.c's: magic, version, count, then zeros.
  const auto* header = static_cast<const int32_t*>(shard.storage()->data());
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], static_cast<int32_t>(tokens.size()));
  for (int i = 3; i < kShardHeaderInts; ++i) ASSERT_EQ(header[i], 0) << "header word " << i;
}

TEST_F(TokenShardTest, Int32WriterAndEmptyShard) {
  const std::vector<int32_t> tokens = {5, 65535, 0, 256};
  write_token_shard(dir_ / "a.bin", tokens);
  const TokenShard shard(dir_ / "a.bin");
  ASSERT_EQ(shard.size(), 4);
  EXPECT_EQ(shard[1], 65535);
  EXPECT_EQ(shard[3], 256);

  write_token_shard(dir_ / "empty.bin", std::vector<int32_t>{});
  EXPECT_EQ(TokenShard(dir_ / "empty.bin").size(), 0);
}

TEST_F(TokenShardTest, MappingOutlivesTheShardObject) {
  write_token_shard(dir_ / "a.bin", std::vector<int32_t>{9, 8, 7});
  StoragePtr storage;
  {
    const TokenShard shard(dir_ / "a.bin");
    storage = shard.storage();
  }
  const auto* tokens =
      reinterpret_cast<const uint16_t*>(static_cast<const char*>(storage->data()) + 1024);
  EXPECT_EQ(tokens[2], 7);
}

TEST_F(TokenShardTest, WriterRejectsIdsOutsideUint16) {
  const fs::path path = dir_ / "bad.bin";
  std::string message = error_of([&] {
    write_token_shard(path, std::vector<int32_t>{1, 2, 65536});
  });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "token 65536 at position 2"));
  EXPECT_TRUE(contains(message, "[0, 65535]"));
  message = error_of([&] { write_token_shard(path, std::vector<int32_t>{-1}); });
  EXPECT_TRUE(contains(message, "token -1 at position 0"));
  EXPECT_FALSE(fs::exists(path)) << "a rejected shard must not be written";
}

TEST_F(TokenShardTest, WriteIsAtomicAndCreatesFolders) {
  const fs::path path = dir_ / "nested" / "deeper" / "s.bin";
  write_token_shard(path, std::vector<int32_t>{1, 2, 3});
  write_token_shard(path, std::vector<int32_t>{4, 5});  // replaces the old shard whole
  const TokenShard shard(path);
  ASSERT_EQ(shard.size(), 2);
  EXPECT_EQ(shard[0], 4);
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    EXPECT_EQ(entry.path().filename(), "s.bin") << "temporary file left behind: " << entry.path();
  }
}

TEST_F(TokenShardTest, MissingFileNamesThePath) {
  const fs::path path = dir_ / "does_not_exist.bin";
  const std::string message = error_of([&] { TokenShard shard(path); });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "No such file"));
}

TEST_F(TokenShardTest, FileShorterThanHeader) {
  const fs::path path = dir_ / "short.bin";
  std::ofstream(path, std::ios::binary) << std::string(100, '\0');
  const std::string message = error_of([&] { TokenShard shard(path); });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "100 bytes, shorter than the 1024-byte header"));
}

TEST_F(TokenShardTest, WrongMagicNamesFoundAndExpected) {
  const fs::path path =
      corrupted("magic.bin", {1, 2, 3}, [](std::string& b) { set_header(b, 0, 20240326); });
  const std::string message = error_of([&] { TokenShard shard(path); });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "magic 20240326 but expected 20240520"));
}

TEST_F(TokenShardTest, WrongVersion) {
  const fs::path path =
      corrupted("version.bin", {1, 2, 3}, [](std::string& b) { set_header(b, 1, 2); });
  const std::string message = error_of([&] { TokenShard shard(path); });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "version 2 but expected 1"));
}

TEST_F(TokenShardTest, TruncatedFileSaysExpectedAndFoundBytes) {
  const fs::path path = corrupted("trunc.bin", std::vector<uint16_t>(100, 5),
                                  [](std::string& b) { b.resize(b.size() - 10); });
  const std::string message = error_of([&] { TokenShard shard(path); });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "truncated"));
  EXPECT_TRUE(contains(message, "100 tokens"));
  EXPECT_TRUE(contains(message, "should be 1224 bytes, but it is 1214 bytes"));
}

TEST_F(TokenShardTest, TrailingBytesAreAnError) {
  const fs::path path = corrupted("long.bin", {1, 2}, [](std::string& b) { b += "xy"; });
  const std::string message = error_of([&] { TokenShard shard(path); });
  EXPECT_TRUE(contains(message, "should be 1028 bytes, but it is 1030 bytes"));
}

TEST_F(TokenShardTest, NegativeCount) {
  const fs::path path = corrupted("neg.bin", {1}, [](std::string& b) { set_header(b, 2, -4); });
  EXPECT_TRUE(contains(error_of([&] { TokenShard shard(path); }), "negative token count -4"));
}

TEST_F(TokenShardTest, ValidateIdsNamesFilePositionAndId) {
  const fs::path path = dir_ / "ids.bin";
  write_token_shard(path, std::vector<int32_t>{1, 2, 300, 3, 999});
  const TokenShard shard(path);
  shard.validate_ids(1000);
  shard.validate_ids(70000);  // larger than any uint16: nothing to check
  const std::string message = error_of([&] { shard.validate_ids(257); });
  EXPECT_TRUE(contains(message, path.string()));
  EXPECT_TRUE(contains(message, "id 300 at position 2"));
  EXPECT_TRUE(contains(message, "257 ids"));
}

TEST_F(TokenShardTest, DatasetGlobIsSortedAndSumsTokens) {
  write_token_shard(dir_ / "train_001.bin", std::vector<int32_t>{4, 5});
  write_token_shard(dir_ / "train_000.bin", std::vector<int32_t>{1, 2, 3});
  write_token_shard(dir_ / "val_000.bin", std::vector<int32_t>{9});
  const TokenDataset dataset = TokenDataset::from_pattern((dir_ / "train_*.bin").string());
  ASSERT_EQ(dataset.num_shards(), 2u);
  EXPECT_EQ(dataset.shard(0).path().filename(), "train_000.bin");
  EXPECT_EQ(dataset.shard(1).path().filename(), "train_001.bin");
  EXPECT_EQ(dataset.total_tokens(), 5);

  const TokenDataset single = TokenDataset::from_pattern((dir_ / "val_000.bin").string());
  EXPECT_EQ(single.total_tokens(), 1);
}

TEST_F(TokenShardTest, DatasetErrors) {
  const std::string pattern = (dir_ / "kjv_train_*.bin").string();
  std::string message = error_of([&] { TokenDataset::from_pattern(pattern); });
  EXPECT_TRUE(contains(message, "no token shards match"));
  EXPECT_TRUE(contains(message, pattern));

  EXPECT_TRUE(contains(error_of([&] { TokenDataset dataset(std::vector<fs::path>{}); }),
                       "at least one shard"));

  write_token_shard(dir_ / "a.bin", std::vector<int32_t>{1, 2});
  write_token_shard(dir_ / "b.bin", std::vector<int32_t>{3, 60000});
  const TokenDataset dataset({dir_ / "a.bin", dir_ / "b.bin"});
  message = error_of([&] { dataset.validate_ids(50257); });
  EXPECT_TRUE(contains(message, (dir_ / "b.bin").string()));
  EXPECT_TRUE(contains(message, "id 60000 at position 1"));
}

}  // namespace
}  // namespace braid::data
