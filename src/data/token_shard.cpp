// Opening (mmap + header validation) and atomic writing of llm.c-format token shards.
#include "braid/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "braid/core/error.h"

namespace braid::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .bin token format is little-endian; a big-endian host would need byte swaps");

std::string errno_text() {
  return std::strerror(errno);
}

// Closes a POSIX descriptor on every exit path, including exceptions.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void write_all(int fd, const void* data, size_t bytes, const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    BRAID_CHECK(n > 0, "writing token shard '{}' failed: {} (is the disk full or read-only?)",
                path.string(), errno_text());
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void write_shard_bytes(const std::filesystem::path& path, const uint16_t* tokens, int64_t count) {
  BRAID_CHECK(count <= INT32_MAX,
              "cannot write {} tokens to '{}': the .bin header stores the count as int32, so a "
              "shard holds at most {} tokens; split the data over several shards",
              count, path.string(), INT32_MAX);
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    BRAID_CHECK(!ec, "cannot create folder '{}' for token shard '{}': {}",
                path.parent_path().string(), path.string(), ec.message());
  }

  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(count);

  // The temporary name carries the pid so two processes writing the same shard do not clash.
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp.{}", ::getpid());
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  BRAID_CHECK(fd.get() >= 0, "cannot create temporary file '{}' for token shard '{}': {}",
              tmp.string(), path.string(), errno_text());
  try {
    write_all(fd.get(), header.data(), sizeof(header), path);
    write_all(fd.get(), tokens, static_cast<size_t>(count) * sizeof(uint16_t), path);
    BRAID_CHECK(::fsync(fd.get()) == 0, "fsync of token shard '{}' failed: {}", tmp.string(),
                errno_text());
    BRAID_CHECK(::close(fd.release()) == 0, "closing token shard '{}' failed: {}", tmp.string(),
                errno_text());
    BRAID_CHECK(::rename(tmp.c_str(), path.c_str()) == 0,
                "cannot rename '{}' to '{}': {} (is the target a folder?)", tmp.string(),
                path.string(), errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace

TokenShard::TokenShard(const std::filesystem::path& path) : path_(path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  BRAID_CHECK(fd.get() >= 0,
              "cannot open token shard '{}': {} (expected an llm.c-format .bin token file; "
              "examples/gpt/prepare_data.sh makes them)",
              path.string(), errno_text());
  struct stat st {};
  BRAID_CHECK(::fstat(fd.get(), &st) == 0, "cannot stat token shard '{}': {}", path.string(),
              errno_text());
  BRAID_CHECK(S_ISREG(st.st_mode), "token shard '{}' is not a regular file (expected a .bin file)",
              path.string());
  const int64_t file_bytes = st.st_size;
  BRAID_CHECK(file_bytes >= kShardHeaderBytes,
              "token shard '{}' is {} bytes, shorter than the {}-byte header (256 int32) every "
              ".bin token file starts with",
              path.string(), file_bytes, kShardHeaderBytes);

  void* map = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  BRAID_CHECK(map != MAP_FAILED, "cannot mmap token shard '{}' ({} bytes): {}", path.string(),
              file_bytes, errno_text());
  // From here the Storage owns the mapping, so every error path below unmaps it.
  storage_ = std::make_shared<Storage>(
      map, static_cast<size_t>(file_bytes), Device::cpu(),
      [bytes = static_cast<size_t>(file_bytes)](void* p) { ::munmap(p, bytes); });

  int32_t header[3];
  std::memcpy(header, map, sizeof(header));
  BRAID_CHECK(header[0] == kShardMagic,
              "token shard '{}' has magic {} but expected {} (llm.c .bin token format); is it "
              "a model or some other file?",
              path.string(), header[0], kShardMagic);
  BRAID_CHECK(header[1] == kShardVersion,
              "token shard '{}' has version {} but expected {} (uint16 token ids); version 2 "
              "files hold uint32 ids, which braid does not read",
              path.string(), header[1], kShardVersion);
  BRAID_CHECK(header[2] >= 0, "token shard '{}' has a negative token count {} in its header",
              path.string(), header[2]);
  const int64_t count = header[2];
  const int64_t expected_bytes = kShardHeaderBytes + count * 2;
  BRAID_CHECK(file_bytes == expected_bytes,
              "token shard '{}' is {}: its header says {} tokens, so the file should be {} "
              "bytes, but it is {} bytes",
              path.string(),
              file_bytes < expected_bytes ? "truncated" : "longer than its header says", count,
              expected_bytes, file_bytes);

  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map) + kShardHeaderBytes);
  size_ = count;
}

void TokenShard::validate_ids(int64_t vocab_size) const {
  BRAID_CHECK(vocab_size > 0, "validate_ids needs a positive vocabulary size, got {}", vocab_size);
  if (vocab_size > kMaxShardTokenId) return;  // every uint16 is a valid id
  const auto limit = static_cast<uint16_t>(vocab_size);
  // A branch-free max over the shard vectorises; the slow search runs only on failure.
  uint16_t max_id = 0;
  for (int64_t i = 0; i < size_; ++i) max_id = std::max(max_id, tokens_[i]);
  if (max_id < limit) return;
  const uint16_t* bad =
      std::find_if(tokens_, tokens_ + size_, [&](uint16_t t) { return t >= limit; });
  BRAID_FAIL(
      "token shard '{}' holds id {} at position {}, but the vocabulary has {} ids (valid ids are "
      "0..{}); was it tokenised for a different model?",
      path_.string(), *bad, bad - tokens_, vocab_size, vocab_size - 1);
}

void write_token_shard(const std::filesystem::path& path, std::span<const uint16_t> tokens) {
  write_shard_bytes(path, tokens.data(), static_cast<int64_t>(tokens.size()));
}

void write_token_shard(const std::filesystem::path& path, std::span<const int32_t> tokens) {
  std::vector<uint16_t> narrow(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    BRAID_CHECK(id >= 0 && id <= kMaxShardTokenId,
                "cannot write token shard '{}': token {} at position {} is outside [0, {}], the "
                "range the .bin format's uint16 ids can hold",
                path.string(), id, i, kMaxShardTokenId);
    narrow[i] = static_cast<uint16_t>(id);
  }
  write_shard_bytes(path, narrow.data(), static_cast<int64_t>(narrow.size()));
}

}  // namespace braid::data
