// Checkpoint file layout helpers: names, durable writes, manifests, verified slice reads.
#include "format.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "braid/ckpt/crc32c.h"
#include "braid/core/error.h"

namespace braid::ckpt {

std::string step_folder_name(int64_t step) {
  return fmt::format("step_{:08d}", step);
}
std::string rank_data_file(int rank) {
  return fmt::format("rank_{:05d}.bin", rank);
}
std::string rank_manifest_file(int rank) {
  return fmt::format("rank_{:05d}.manifest", rank);
}

std::vector<fs::path> committed_checkpoints(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step_", 0) == 0 &&
        name.find(".tmp") == std::string::npos && fs::exists(entry.path() / kManifestFile))
      out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort by step
  return out;
}

namespace {

void fsync_fd(int fd, const fs::path& what) {
  BRAID_CHECK(::fsync(fd) == 0, "fsync of {} failed: {}", what.string(), std::strerror(errno));
}

}  // namespace

void fail_write(std::string_view what, const fs::path& file, int64_t done, int64_t total, int error,
                std::string_view note) {
  const bool full = error == ENOSPC || error == EDQUOT;
  BRAID_FAIL("{} {} failed after {} of {} bytes: {}{}{}", what, file.string(), done, total,
             std::strerror(error), full ? " (is the disk full?)" : "", note);
}

void fsync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  BRAID_CHECK(fd >= 0, "cannot open folder {}: {}", folder.string(), std::strerror(errno));
  fsync_fd(fd, folder);
  ::close(fd);
}

void write_file(const fs::path& path, const std::string& bytes, bool atomic) {
  const fs::path target = atomic ? fs::path(path.string() + ".tmp") : path;
  const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BRAID_CHECK(fd >= 0, "cannot create {}: {}", target.string(), std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail_write("writing", target, static_cast<int64_t>(done), static_cast<int64_t>(bytes.size()),
                 error);
    }
    done += static_cast<size_t>(n);
  }
  fsync_fd(fd, target);
  ::close(fd);
  if (!atomic) return;
  BRAID_CHECK(std::rename(target.c_str(), path.c_str()) == 0, "renaming {} to {} failed: {}",
              target.string(), path.string(), std::strerror(errno));
  fsync_folder(path.parent_path());
}

void write_message(const fs::path& path, const google::protobuf::Message& message) {
  std::string bytes;
  BRAID_CHECK(message.SerializeToString(&bytes), "cannot serialise {}", path.string());
  write_file(path, bytes, /*atomic=*/true);
}

void read_message(const fs::path& path, google::protobuf::Message& message) {
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(), "cannot read {} (missing: the checkpoint is not complete)", path.string());
  BRAID_CHECK(message.ParseFromIstream(&in), "{} is corrupt (not a valid {})", path.string(),
              message.GetTypeName());
}

nn::ShardSpec spec_of(const proto::TensorSlice& s) {
  nn::ShardSpec spec;
  spec.global_shape.assign(s.global_shape().begin(), s.global_shape().end());
  spec.block_shape.assign(s.block_shape().begin(), s.block_shape().end());
  spec.offsets.assign(s.offsets().begin(), s.offsets().end());
  spec.sizes.assign(s.sizes().begin(), s.sizes().end());
  spec.local_shape = {spec.local_numel()};
  return spec;
}

void set_spec(proto::TensorSlice& slice, const nn::ShardSpec& spec) {
  for (int64_t v : spec.global_shape) slice.add_global_shape(v);
  for (int64_t v : spec.block_shape) slice.add_block_shape(v);
  for (int64_t v : spec.offsets) slice.add_offsets(v);
  for (int64_t v : spec.sizes) slice.add_sizes(v);
}

std::vector<char> read_slice(const fs::path& folder, const proto::TensorSlice& slice) {
  const fs::path file = folder / slice.file();
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  BRAID_CHECK(!ec, "checkpoint file {} (tensor '{}') is missing: {}", file.string(), slice.name(),
              ec.message());
  const int64_t end = slice.byte_offset() + slice.byte_length();
  BRAID_CHECK(static_cast<int64_t>(size) >= end,
              "checkpoint file {} is {} bytes but tensor '{}' needs bytes [{}, {}): the file is "
              "truncated",
              file.string(), size, slice.name(), slice.byte_offset(), end);
  std::vector<char> bytes(static_cast<size_t>(slice.byte_length()));
  std::ifstream in(file, std::ios::binary);
  in.seekg(slice.byte_offset());
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BRAID_CHECK(in.good(), "reading tensor '{}' from {} failed", slice.name(), file.string());
  const int64_t chunk = slice.chunk_bytes();
  const int64_t chunks = (slice.byte_length() + chunk - 1) / chunk;
  BRAID_CHECK(slice.chunk_crc32c_size() == chunks,
              "tensor '{}' in {} lists {} checksums for {} chunks", slice.name(), file.string(),
              slice.chunk_crc32c_size(), chunks);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * chunk, length = std::min(chunk, slice.byte_length() - begin);
    BRAID_CHECK(crc32c(bytes.data() + begin, static_cast<size_t>(length)) ==
                    slice.chunk_crc32c(static_cast<int>(c)),
                "checkpoint file {}: tensor '{}' chunk {} (bytes {}..{} of the file) fails its "
                "checksum: the file is corrupt",
                file.string(), slice.name(), c, slice.byte_offset() + begin,
                slice.byte_offset() + begin + length);
  }
  return bytes;
}

}  // namespace braid::ckpt
