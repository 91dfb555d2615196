// TensorBoard event files: the masked CRC-32C against a bitwise reference, records written and
// read back, and every kind of corrupted or cut byte detected by the reader.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "braid/core/error.h"
#include "train/tensorboard_reader.h"
#include "train/tensorboard_record.h"
#include "train/tensorboard_writer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

// CRC-32C bit by bit (reflected polynomial 0x82f63b78), independent of braid's table code.
uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& b) {
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(b.data(), static_cast<std::streamsize>(b.size()));
}

TEST(TensorBoardRecord, MaskedCrcMatchesTheBitwiseReference) {
  // The CRC-32C check value of "123456789" is 0xe3069283 (RFC 3720 B.4).
  EXPECT_EQ(crc32c_bitwise("123456789"), 0xe3069283u);
  for (const std::string s : {std::string(), std::string("123456789"), std::string(1000, '\x5a'),
                              std::string("\0\1\2\3", 4)})
    EXPECT_EQ(masked_crc32c(s.data(), s.size()), mask(crc32c_bitwise(s))) << s.size();
  // The empty string's CRC is 0, so its masked CRC is the mask's constant.
  EXPECT_EQ(masked_crc32c("", 0), 0xa282ead8u);
}

TEST(TensorBoardRecord, FrameIsLengthCrcDataCrc) {
  const std::string data = "hello, tensorboard";
  const std::string r = frame_record(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(le(r, 0, 8), data.size());
  EXPECT_EQ(le(r, 8, 4), mask(crc32c_bitwise(r.substr(0, 8))));
  EXPECT_EQ(r.substr(12, data.size()), data);
  EXPECT_EQ(le(r, 12 + data.size(), 4), mask(crc32c_bitwise(data)));
}

class TensorBoardFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_tb_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / tensorboard_file_name(1700000000, "host")).string();
    TensorBoardWriter w(path_);
    w.write_scalars(1, 1700000001.5, {{"train/loss", 5.25f}, {"train/lr", 1e-3f}});
    w.write_scalars(2, 1700000002.5, {{"val/loss", 4.5f}});
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string path_;
};

TEST_F(TensorBoardFile, WrittenEventsReadBack) {
  EXPECT_EQ(fs::path(path_).filename().string(), "events.out.tfevents.1700000000.host");
  const auto events = read_tensorboard_events(path_);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.6e9);
  EXPECT_EQ(events[1].step(), 1);
  EXPECT_EQ(events[1].wall_time(), 1700000001.5);
  ASSERT_EQ(events[1].summary().value_size(), 2);
  EXPECT_EQ(events[1].summary().value(0).tag(), "train/loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 5.25f);
  EXPECT_EQ(events[1].summary().value(1).tag(), "train/lr");
  EXPECT_EQ(events[1].summary().value(1).simple_value(), 1e-3f);
  EXPECT_EQ(events[2].step(), 2);
  ASSERT_EQ(events[2].summary().value_size(), 1);
  EXPECT_EQ(events[2].summary().value(0).simple_value(), 4.5f);

  // Appending to an existing file adds no second file_version event.
  {
    TensorBoardWriter again(path_);
    again.write_scalars(3, 1.0, {{"train/loss", 1.0f}});
  }
  const auto more = read_tensorboard_events(path_);
  ASSERT_EQ(more.size(), 4u);
  EXPECT_TRUE(more[3].has_summary());
  EXPECT_EQ(more[3].step(), 3);
}

// Every byte of every record is covered: a flip anywhere in the file is an error naming a CRC.
TEST_F(TensorBoardFile, EveryCorruptedByteIsDetected) {
  const std::string good = read_bytes(path_);
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    write_bytes(path_, bad);
    try {
      read_tensorboard_events(path_);
      ADD_FAILURE() << "a flipped byte " << at << " was not detected";
    } catch (const Error& e) {
      const std::string msg = e.what();
      // A flipped length may also point past the end; both name what is wrong.
      EXPECT_TRUE(msg.find("fails the CRC") != std::string::npos ||
                  msg.find("ends inside record") != std::string::npos)
          << at << ": " << msg;
    }
  }
}

TEST_F(TensorBoardFile, ACutTailIsAnErrorOrTheEventsBeforeIt) {
  const std::string good = read_bytes(path_);
  write_bytes(path_, good.substr(0, good.size() - 3));
  try {
    read_tensorboard_events(path_);
    ADD_FAILURE() << "a cut record was not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ends inside record 2"), std::string::npos) << e.what();
  }
  bool cut = false;
  const auto events = read_tensorboard_events(path_, &cut);
  EXPECT_TRUE(cut);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step(), 1);
}

}  // namespace
}  // namespace braid::train
