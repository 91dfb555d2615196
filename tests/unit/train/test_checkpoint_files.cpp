// Checkpoint files at the byte level: CRC-32C (the hardware path against the table) and the
// chunked data-file writer (direct or buffered: the same bytes, the same checksums, and a
// full disk reported as such).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "braid/ckpt/crc32c.h"
#include "ckpt/chunked_file_writer.h"  // private to libbraid

namespace braid::ckpt {
namespace {

namespace fs = std::filesystem;

std::vector<unsigned char> pseudo_random_bytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> data(n);
  for (auto& byte : data)
    byte = static_cast<unsigned char>((seed = seed * 6364136223846793005ull + 1) >> 56);
  return data;
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c("", 0), 0u);
  // Continuing a checksum equals checksumming the whole.
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345", 5)), 0xE3069283u);
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
}

// The three-lane hardware path (blocks of 3 x 4 KiB) against the byte-wise table: lengths
// around the block size, odd start addresses, and checksums continued across calls.
TEST(Crc32c, FastPathEqualsTheTable) {
  const std::vector<unsigned char> data = pseudo_random_bytes(3 * 3 * 4096 + 777, 12345);
  for (size_t size : {size_t{0}, size_t{7}, size_t{4096}, size_t{3 * 4096 - 1}, size_t{3 * 4096},
                      size_t{3 * 4096 + 9}, size_t{6 * 4096 + 100}, data.size() - 3})
    for (size_t offset : {size_t{0}, size_t{3}}) {
      const unsigned char* p = data.data() + offset;
      ASSERT_EQ(crc32c(p, size), crc32c_portable(p, size))
          << "size " << size << " offset " << offset;
      const size_t half = size / 2;
      EXPECT_EQ(crc32c(p + half, size - half, crc32c(p, half)), crc32c_portable(p, size));
    }
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Pieces of awkward sizes (odd, a staging buffer and a bit, a chunk and a bit) come back
// byte for byte, with one checksum per chunk of each piece, whichever way the file is written.
TEST(ChunkedFileWriter, WritesTheExactBytesAndChunkChecksums) {
  const fs::path file = fs::temp_directory_path() / ("braid_chunked_" + std::to_string(::getpid()));
  const std::vector<size_t> sizes = {1, (2 << 20) + 5, 17, (1 << 20) + 3, 4096, 0, 333};
  for (auto io : {ChunkedFileWriter::Io::direct_if_possible, ChunkedFileWriter::Io::buffered}) {
    std::string expected;
    std::vector<uint32_t> expected_crcs, crcs;
    {
      ChunkedFileWriter writer(file, 0, io);
      uint64_t seed = 1;
      for (size_t size : sizes) {
        const std::vector<unsigned char> piece = pseudo_random_bytes(size, ++seed);
        expected.append(piece.begin(), piece.end());
        for (size_t begin = 0; begin < size; begin += 1 << 20)
          expected_crcs.push_back(
              crc32c(piece.data() + begin, std::min<size_t>(1 << 20, size - begin)));
        for (uint32_t crc : writer.append(piece.data(), static_cast<int64_t>(size), 1 << 20))
          crcs.push_back(crc);
      }
      EXPECT_EQ(writer.bytes_appended(), static_cast<int64_t>(expected.size()));
      writer.finish();
    }
    EXPECT_EQ(crcs, expected_crcs);
    const std::string written = read_all(file);
    ASSERT_EQ(written.size(), expected.size());
    EXPECT_TRUE(written == expected) << "the file's bytes differ from the appended pieces";
  }
  fs::remove(file);
}

// A real full device (/dev/full fails every write with ENOSPC): the error names the file,
// how far the write got and the reason.
TEST(ChunkedFileWriter, AFullDiskIsReportedClearly) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::vector<unsigned char> piece(3 << 20, 7);
  try {
    ChunkedFileWriter writer("/dev/full", 3 << 20);
    writer.append(piece.data(), static_cast<int64_t>(piece.size()), 1 << 20);
    writer.finish();
    FAIL() << "writing to /dev/full succeeded";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/dev/full"), std::string::npos) << what;
    EXPECT_NE(what.find("of 3145728 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("No space left on device (is the disk full?)"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace braid::ckpt
