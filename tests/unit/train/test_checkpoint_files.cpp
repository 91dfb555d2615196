// Checkpoint files at the byte level: CRC-32C (the hardware path against the table) and the
// chunked data-file writer (direct or buffered: the same bytes at the offsets it reports, the
// same checksums, images written in place, and a full disk reported as such) and the snapshot
// image the checkpoint copies tensors into.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "braid/ckpt/crc32c.h"
#include "braid/core/error.h"
#include "ckpt/chunked_file_writer.h"  // private to libbraid
#include "ckpt/snapshot_image.h"

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

// A piece in its own buffer, `misalign` bytes past a page boundary.
struct AlignedPiece {
  AlignedPiece(size_t size, size_t misalign, uint64_t seed)
      : buffer(static_cast<unsigned char*>(std::aligned_alloc(4096, size + 8192)), std::free),
        data(buffer.get() + misalign),
        size(size) {
    const std::vector<unsigned char> bytes = pseudo_random_bytes(size, seed);
    std::copy(bytes.begin(), bytes.end(), data);
  }
  std::unique_ptr<unsigned char, void (*)(void*)> buffer;
  unsigned char* data;
  size_t size;
};

// Pieces of awkward sizes (odd, a staging buffer and a bit, a chunk and a bit) and images
// (block-aligned or not in memory) come back byte for byte at the offsets the writer
// reported, whichever way the file is written: each from a block boundary with zeros before
// it, pieces with one checksum per chunk.
TEST(ChunkedFileWriter, WritesTheExactBytesAndChunkChecksums) {
  const fs::path file = fs::temp_directory_path() / ("braid_chunked_" + std::to_string(::getpid()));
  struct Part {
    size_t size, misalign;
    bool image;
  };
  const std::vector<Part> parts = {{1, 0, false},
                                   {(2 << 20) + 5, 0, false},
                                   {17, 3, false},
                                   {(1 << 20) + 3, 0, true},
                                   {4096, 0, false},
                                   {0, 0, false},
                                   {333, 0, false},
                                   {(64 << 10) + 100, 1, true},
                                   {8192, 0, true},
                                   {100, 0, true},
                                   {(3 << 20) + 4097, 0, false},
                                   {5, 0, false}};
  const int64_t chunk = 1 << 20;
  for (auto io : {ChunkedFileWriter::Io::direct_if_possible, ChunkedFileWriter::Io::buffered}) {
    std::vector<AlignedPiece> pieces;
    std::vector<int64_t> offsets;
    int64_t appended = 0;
    {
      ChunkedFileWriter writer(file, 0, io);
      uint64_t seed = 1;
      for (const Part& part : parts) {
        pieces.emplace_back(part.size, part.misalign, ++seed);
        const AlignedPiece& p = pieces.back();
        const int64_t before = writer.bytes_appended();
        if (part.image) {
          offsets.push_back(writer.append_image(p.data, static_cast<int64_t>(p.size)));
        } else {
          const ChunkedFileWriter::Piece placed =
              writer.append(p.data, static_cast<int64_t>(p.size), chunk);
          offsets.push_back(placed.offset);
          std::vector<uint32_t> crcs;
          for (size_t begin = 0; begin < p.size; begin += chunk)
            crcs.push_back(crc32c(p.data + begin, std::min<size_t>(chunk, p.size - begin)));
          EXPECT_EQ(placed.chunk_crc32c, crcs) << "piece of " << p.size << " bytes";
        }
        EXPECT_EQ(offsets.back() % 4096, 0);
        EXPECT_LT(offsets.back() - before, 4096);
        EXPECT_EQ(writer.bytes_appended(), offsets.back() + static_cast<int64_t>(p.size));
      }
      appended = writer.bytes_appended();
      writer.finish();
    }
    const std::string written = read_all(file);
    ASSERT_EQ(static_cast<int64_t>(written.size()), appended);
    std::string covered(written.size(), 0);
    for (size_t i = 0; i < pieces.size(); ++i) {
      const AlignedPiece& p = pieces[i];
      EXPECT_EQ(0, std::memcmp(written.data() + offsets[i], p.data, p.size))
          << "part " << i << " differs in the file";
      covered.replace(static_cast<size_t>(offsets[i]), p.size, p.size, 1);
    }
    for (size_t b = 0; b < written.size(); ++b)
      if (!covered[b]) ASSERT_EQ(written[b], 0) << "padding byte " << b << " is not zero";
  }
  fs::remove(file);
}

// The snapshot copy: every dense entry (aligned in memory or not) lands in one image at a
// block-aligned offset with its chunks' checksums, zeros between entries, and owns its
// values (changing the source later changes nothing); an entry that is not dense is cloned
// and left to the writer.
TEST(SnapshotImage, CopiesEntriesIntoOneFileShapedImage) {
  const std::vector<int64_t> sizes = {3, (1 << 18) + 5, 1024, 0, (1 << 20) / 4 * 3 + 1};
  std::vector<ShardEntry> entries;
  std::vector<Tensor> sources;
  uint64_t seed = 5;
  for (int64_t n : sizes) {
    // Every other source starts one float into its buffer: the copy reads unaligned memory.
    Tensor t = Tensor::empty({n + 1}).narrow(0, static_cast<int64_t>(entries.size() % 2), n);
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(++seed % 1000) - 3;
    sources.push_back(t);
    entries.push_back({"e" + std::to_string(entries.size()), t, nn::ShardSpec::whole({n})});
  }
  Tensor matrix = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  entries.push_back({"strided", matrix.transpose(0, 1), nn::ShardSpec::whole({3, 2})});
  snapshot_values(entries);
  const StoragePtr image = image_of(entries);
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(image->data()) % kFileBlockBytes, 0u);
  std::string covered(image->bytes(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const ShardEntry& e = entries[i];
    ASSERT_GE(e.image_offset, 0);
    EXPECT_EQ(e.image_offset % kFileBlockBytes, 0);
    EXPECT_EQ(e.values.storage(), image);
    const char* bytes = static_cast<const char*>(image->data()) + e.image_offset;
    EXPECT_EQ(0, std::memcmp(bytes, sources[i].data_ptr(), sources[i].nbytes()));
    std::vector<uint32_t> crcs;
    for (int64_t begin = 0; begin < static_cast<int64_t>(sources[i].nbytes()); begin += 1 << 20)
      crcs.push_back(crc32c(bytes + begin, std::min<size_t>(1 << 20, sources[i].nbytes() - begin)));
    EXPECT_EQ(e.chunk_crc32c, crcs) << e.name;
    covered.replace(static_cast<size_t>(e.image_offset), e.values.nbytes(), e.values.nbytes(), 1);
    sources[i].fill_(-7.0f);
    if (sizes[i] > 0) EXPECT_NE(e.values.to_vector()[0], -7.0f);
  }
  for (size_t b = 0; b < covered.size(); ++b)
    if (!covered[b]) ASSERT_EQ(static_cast<const char*>(image->data())[b], 0) << "byte " << b;
  const ShardEntry& strided = entries.back();
  EXPECT_EQ(strided.image_offset, -1);
  EXPECT_TRUE(strided.chunk_crc32c.empty());
  EXPECT_EQ(strided.values.to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_NE(strided.values.storage(), matrix.storage());
}

// prepare()'s buffer: zeroed to the last byte past whole 2 MiB pieces, even when the allocator
// recycles a dirty block; when told to stop it still hands back a buffer of the full size,
// which a snapshot then fills like any other.
TEST(SnapshotImage, TouchedImageZeroesEveryPieceOrStopsWhenAsked) {
  const int64_t bytes = (int64_t{5} << 20) + 4096 * 3;
  {
    Storage dirty(static_cast<size_t>(bytes), Device::cpu());
    std::memset(dirty.data(), 0x5a, static_cast<size_t>(bytes));
  }  // freed into the host allocator's cache of large blocks
  const StoragePtr image = touched_image(bytes);
  ASSERT_EQ(static_cast<int64_t>(image->bytes()), bytes);
  const char* p = static_cast<const char*>(image->data());
  EXPECT_EQ(std::count(p, p + bytes, 0), bytes);

  const std::atomic<bool> stop{true};
  StoragePtr stopped = touched_image(bytes, &stop);
  ASSERT_EQ(static_cast<int64_t>(stopped->bytes()), bytes);
  const int64_t n = bytes / 4 - 10;  // the image the snapshot needs: the same block count
  Tensor values = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) values.data<float>()[i] = static_cast<float>(i % 977);
  std::vector<ShardEntry> entries = {{"w", values, nn::ShardSpec::whole({n})}};
  snapshot_values(entries, stopped);
  EXPECT_EQ(entries[0].values.storage(), stopped);
  EXPECT_EQ(entries[0].values.to_vector(), values.to_vector());
  const char* tail = static_cast<const char*>(stopped->data()) + values.nbytes();
  EXPECT_EQ(std::count(tail, tail + (bytes - static_cast<int64_t>(values.nbytes())), 0),
            bytes - static_cast<int64_t>(values.nbytes()));
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

// A write cut short partway (here by a file size limit, as a disk filling up mid-file would):
// the message says how many bytes reached the file, for an image written in place too.
TEST(ChunkedFileWriter, AWriteCutShortReportsTheBytesThatReachedTheFile) {
  const fs::path file = fs::temp_directory_path() / ("braid_cut_" + std::to_string(::getpid()));
  const std::unique_ptr<void, decltype(&std::free)> image(std::aligned_alloc(4096, 3 << 20),
                                                          std::free);
  std::memset(image.get(), 5, 3 << 20);
  rlimit saved = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  for (auto io : {ChunkedFileWriter::Io::direct_if_possible, ChunkedFileWriter::Io::buffered}) {
    std::string what = "no error";
    rlimit cut = saved;
    cut.rlim_cur = 1 << 20;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &cut), 0);
    try {
      ChunkedFileWriter writer(file, 3 << 20, io);
      writer.append_image(image.get(), 3 << 20);
      writer.finish();
    } catch (const Error& e) {
      what = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    const auto written = fs::file_size(file);
    EXPECT_GT(written, 0u);
    EXPECT_NE(what.find(fmt::format("failed after {} of {} bytes", written, 3 << 20)),
              std::string::npos)
        << what;
  }
  std::signal(SIGXFSZ, old_handler);
  fs::remove(file);
}

}  // namespace
}  // namespace braid::ckpt
