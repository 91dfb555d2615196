// Streams one checkpoint data file to disk and checksums it chunk by chunk on the way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace braid::ckpt {

// Writes a file from appended pieces through an aligned staging buffer with O_DIRECT, where
// the filesystem allows it, else through the page cache.
//
// Why direct I/O: on this kind of machine a buffered write costs the writing thread ~0.7 ms
// of CPU per MiB (allocating and filling page-cache pages), so a 37.5 MiB checkpoint took
// ~27 ms of a core away from training; direct I/O lets the disk read the staging buffer
// itself (~0.05 ms of CPU per MiB). The staging buffer exists because O_DIRECT wants
// block-aligned addresses, lengths and offsets, and tensors lie back to back at any offset;
// each piece is checksummed just before it is staged, so the copy reads it from the cache.
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

  // Appends `size` bytes; returns the CRC-32C of each `chunk_bytes` piece of them, in order
  // (the last one may be shorter).
  std::vector<uint32_t> append(const void* data, int64_t size, int64_t chunk_bytes);
  // Writes what is staged, fsyncs and closes. The file then holds exactly the appended bytes.
  void finish();

  bool direct() const { return direct_; }
  int64_t bytes_appended() const { return appended_; }

 private:
  void stage(const char* data, int64_t size);
  void write_staged(int64_t length);  // the first `length` staged bytes (aligned when direct)
  void write_fully(const char* data, int64_t length);
  [[noreturn]] void fail(const char* what, int error) const;

  std::filesystem::path path_;
  int64_t expected_ = 0;
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<char, void (*)(void*)> staging_;
  int64_t staged_ = 0;    // bytes in the staging buffer
  int64_t appended_ = 0;  // bytes appended so far
  int64_t on_disk_ = 0;   // bytes written to the file (with padding, when direct)
};

}  // namespace braid::ckpt
