// ChunkedFileWriter: direct I/O in place or through an aligned staging buffer, else buffered.
#include "chunked_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "braid/ckpt/crc32c.h"
#include "braid/core/error.h"
#include "format.h"

namespace braid::ckpt {
namespace {

constexpr int64_t kStagingBytes = 2 << 20;  // fits the L2 cache next to the chunk being staged

char* aligned_staging() {
  void* p = nullptr;
  BRAID_CHECK(::posix_memalign(&p, kFileBlockBytes, kStagingBytes) == 0,
              "cannot allocate the {} byte checkpoint staging buffer", kStagingBytes);
  return static_cast<char*>(p);
}

}  // namespace

ChunkedFileWriter::ChunkedFileWriter(std::filesystem::path path, int64_t expected_bytes, Io io)
    : path_(std::move(path)), expected_(expected_bytes), staging_(aligned_staging(), std::free) {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  if (io == Io::direct_if_possible) {
    fd_ = ::open(path_.c_str(), flags | O_DIRECT, 0644);
    direct_ = fd_ >= 0;
  }
  // Filesystems without direct I/O (tmpfs on older kernels, some network mounts) say EINVAL.
  if (fd_ < 0) fd_ = ::open(path_.c_str(), flags, 0644);
  BRAID_CHECK(fd_ >= 0, "cannot create {}: {}", path_.string(), std::strerror(errno));
}

ChunkedFileWriter::~ChunkedFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

ChunkedFileWriter::Piece ChunkedFileWriter::append(const void* data, int64_t size,
                                                   int64_t chunk_bytes) {
  BRAID_CHECK(fd_ >= 0, "{}: append after finish", path_.string());
  pad_to_block();
  const char* bytes = static_cast<const char*>(data);
  Piece piece{appended_, {}};
  for (int64_t begin = 0; begin < size; begin += chunk_bytes) {
    const int64_t length = std::min(chunk_bytes, size - begin);
    piece.chunk_crc32c.push_back(crc32c(bytes + begin, static_cast<size_t>(length)));
    stage(bytes + begin, length);
  }
  appended_ += size;
  return piece;
}

int64_t ChunkedFileWriter::append_image(const void* data, int64_t size) {
  BRAID_CHECK(fd_ >= 0, "{}: append after finish", path_.string());
  pad_to_block();
  if (staged_ > 0) write_staged(staged_);  // whole blocks: direct writes now start aligned
  const int64_t offset = appended_;
  const char* bytes = static_cast<const char*>(data);
  // Direct writes take whole blocks from aligned memory; the rest goes through the staging
  // buffer. Buffered writes take anything.
  int64_t in_place = size;
  if (direct_)
    in_place = reinterpret_cast<uintptr_t>(bytes) % kFileBlockBytes == 0
                   ? size / kFileBlockBytes * kFileBlockBytes
                   : 0;
  write_fully(bytes, in_place);
  stage(bytes + in_place, size - in_place);
  appended_ += size;
  return offset;
}

void ChunkedFileWriter::pad_to_block() {
  static const char kZeros[kFileBlockBytes] = {};
  const int64_t pad = round_up_to_block(appended_) - appended_;
  stage(kZeros, pad);
  appended_ += pad;
}

void ChunkedFileWriter::stage(const char* data, int64_t size) {
  while (size > 0) {
    const int64_t n = std::min(size, kStagingBytes - staged_);
    std::memcpy(staging_.get() + staged_, data, static_cast<size_t>(n));
    staged_ += n;
    data += n;
    size -= n;
    if (staged_ == kStagingBytes) write_staged(kStagingBytes);
  }
}

void ChunkedFileWriter::write_staged(int64_t length) {
  write_fully(staging_.get(), length);
  staged_ = 0;
}

void ChunkedFileWriter::write_fully(const char* data, int64_t length) {
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::write(fd_, data + done, static_cast<size_t>(length - done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && direct_) {
      // Opened, but this filesystem refuses direct writes: continue through the page cache.
      BRAID_CHECK(::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) == 0,
                  "{}: cannot leave direct I/O: {}", path_.string(), std::strerror(errno));
      direct_ = false;
      continue;
    }
    if (n <= 0) fail("writing", n < 0 ? errno : ENOSPC);
    done += n;
    on_disk_ += n;
  }
}

void ChunkedFileWriter::finish() {
  BRAID_CHECK(fd_ >= 0, "{}: finished twice", path_.string());
  if (staged_ > 0) {
    if (direct_) {
      // Direct writes go in whole blocks: pad the tail with zeros, then cut the file back.
      const int64_t padded = round_up_to_block(staged_);
      std::memset(staging_.get() + staged_, 0, static_cast<size_t>(padded - staged_));
      write_staged(padded);
    } else {
      write_staged(staged_);
    }
  }
  if (on_disk_ != appended_ && ::ftruncate(fd_, appended_) != 0) fail("truncating", errno);
  if (::fsync(fd_) != 0) fail("fsync of", errno);
  ::close(fd_);
  fd_ = -1;
}

void ChunkedFileWriter::fail(const char* what, int error) const {
  // What reached the file: appended_ lags behind while a piece is being written, and the last
  // direct write may go past the end with padding.
  fail_write(what, path_, std::min(on_disk_, expected_), expected_, error);
}

}  // namespace braid::ckpt
