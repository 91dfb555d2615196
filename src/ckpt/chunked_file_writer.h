// Streams one checkpoint data file to disk and checksums it chunk by chunk on the way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace braid::ckpt {

// Writes a file from appended pieces with O_DIRECT, where the filesystem allows it, else
// through the page cache.
//
// Why direct I/O: a buffered write costs the writing thread CPU time for every MiB
// (allocating and filling page-cache pages), which a checkpoint takes from training; direct
// I/O lets the disk read the memory itself.
// O_DIRECT wants block-aligned addresses, lengths and offsets, so pieces (tensors lying back
// to back at any offset) are checksummed and copied into an aligned staging buffer, each just
// before it is staged so that the copy reads it from the cache. An image (bytes already laid
// out as the file will hold them, in block-aligned memory: see snapshot_values) goes to the
// disk in place, with no checksum and no copy. Its cost depends on the memory's pages: the kernel
// pins every page it writes from, so huge pages cost far less CPU than 4 KiB ones, and staging
// costs more than either.
class ChunkedFileWriter {
 public:
  enum class Io { direct_if_possible, buffered };
  // Creates (truncates) `path`. `expected_bytes` only makes error messages say how far a
  // write got. Errors name the file.
  ChunkedFileWriter(std::filesystem::path path, int64_t expected_bytes,
                    Io io = Io::direct_if_possible);
  ~ChunkedFileWriter();  // closes; an unfinished file keeps what was written (a crash mid-file)
  ChunkedFileWriter(const ChunkedFileWriter&) = delete;
  ChunkedFileWriter& operator=(const ChunkedFileWriter&) = delete;

  // Where an appended piece starts in the file, and the CRC-32C of each of its chunks.
  struct Piece {
    int64_t offset = 0;
    std::vector<uint32_t> chunk_crc32c;
  };
  // Both appends start at the next block boundary of the file (zeros fill the gap), so every
  // checkpoint slice starts on one, however it was written.
  //
  // Appends `size` bytes, checksummed as chunks of `chunk_bytes` (the last may be shorter).
  Piece append(const void* data, int64_t size, int64_t chunk_bytes);
  // Appends an image of `size` bytes and returns where it starts; written in place when
  // `data` is block-aligned.
  int64_t append_image(const void* data, int64_t size);
  // Writes what is staged, fsyncs and closes. The file then holds exactly the appended bytes.
  void finish();

  bool direct() const { return direct_; }
  int64_t bytes_appended() const { return appended_; }  // with any padding

 private:
  void stage(const char* data, int64_t size);
  void pad_to_block();                // stages zeros up to the file's next block boundary
  void write_staged(int64_t length);  // the first `length` staged bytes (aligned when direct)
  void write_fully(const char* data, int64_t length);
  [[noreturn]] void fail(const char* what, int error) const;

  std::filesystem::path path_;
  int64_t expected_ = 0;
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<char, void (*)(void*)> staging_;
  int64_t staged_ = 0;    // bytes in the staging buffer
  int64_t appended_ = 0;  // bytes appended so far, padding included
  int64_t on_disk_ = 0;   // bytes written to the file (with padding, when direct)
};

}  // namespace braid::ckpt
