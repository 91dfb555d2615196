// Checkpoint file layout helpers: names, durable writes, manifests, verified slice reads.
#include "format.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

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

int64_t step_of_folder(const std::string& name) {
  constexpr std::string_view prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (INT64_MAX - 9) / 10) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::vector<fs::path> committed_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of_folder(entry.path().filename().string());
    if (step >= 0 && entry.is_directory() && fs::exists(entry.path() / kManifestFile))
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
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

namespace {

// A manifest file is the serialised message, then its CRC-32C (little-endian) and this tag,
// so that every byte of it is covered: a flip in the message or the CRC fails the comparison,
// one in the tag fails the tag.
constexpr char kManifestTag[4] = {'b', 'r', 'd', 'M'};
constexpr size_t kTrailerBytes = 4 + sizeof(kManifestTag);

}  // namespace

void write_message(const fs::path& path, const google::protobuf::Message& message) {
  std::string bytes;
  BRAID_CHECK(message.SerializeToString(&bytes), "cannot serialise {}", path.string());
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  bytes.append(kManifestTag, sizeof(kManifestTag));
  write_file(path, bytes, /*atomic=*/true);
}

void read_message(const fs::path& path, google::protobuf::Message& message) {
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(), "cannot read {} (missing: the checkpoint is not complete)", path.string());
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  BRAID_CHECK(!in.bad(), "reading {} failed: {}", path.string(), std::strerror(errno));
  BRAID_CHECK(bytes.size() >= kTrailerBytes &&
                  bytes.compare(bytes.size() - sizeof(kManifestTag), sizeof(kManifestTag),
                                kManifestTag, sizeof(kManifestTag)) == 0,
              "{} is corrupt or not a braid manifest: it does not end in the checksum trailer "
              "(format {} manifests end in a CRC-32C and the tag 'brdM')",
              path.string(), kFormatVersion);
  const size_t size = bytes.size() - kTrailerBytes;
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i)
    stored |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[size + i])) << (8 * i);
  const uint32_t computed = crc32c(bytes.data(), size);
  BRAID_CHECK(stored == computed,
              "{} fails its checksum (stored {:#010x}, computed {:#010x}): the file is corrupt",
              path.string(), stored, computed);
  BRAID_CHECK(message.ParseFromArray(bytes.data(), static_cast<int>(size)),
              "{} is corrupt (not a valid {})", path.string(), message.GetTypeName());
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
  // The zeros between this slice and the next block boundary are read too: no byte of a data
  // file is outside a checksum or this check.
  const int64_t padded = std::min(round_up_to_block(end), static_cast<int64_t>(size));
  std::vector<char> bytes(static_cast<size_t>(padded - slice.byte_offset()));
  std::ifstream in(file, std::ios::binary);
  in.seekg(slice.byte_offset());
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BRAID_CHECK(in.good(), "reading tensor '{}' from {} failed", slice.name(), file.string());
  const auto gap =
      std::find_if(bytes.begin() + slice.byte_length(), bytes.end(), [](char b) { return b != 0; });
  BRAID_CHECK(gap == bytes.end(),
              "checkpoint file {}: byte {} in the padding after tensor '{}' is not zero: the "
              "file is corrupt",
              file.string(), slice.byte_offset() + (gap - bytes.begin()), slice.name());
  bytes.resize(static_cast<size_t>(slice.byte_length()));
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

std::vector<std::string> data_file_problems(const fs::path& file,
                                            std::vector<const proto::TensorSlice*> slices) {
  std::vector<std::string> problems;
  std::sort(slices.begin(), slices.end(),
            [](const auto* a, const auto* b) { return a->byte_offset() < b->byte_offset(); });
  int64_t end = 0;  // of the slices so far
  for (const proto::TensorSlice* s : slices) {
    const int64_t expected = round_up_to_block(end);
    if (s->byte_offset() != expected)
      problems.push_back(fmt::format(
          "{}: tensor '{}' starts at byte {}, but the slice before it ends at {} (slices follow "
          "each other at the next {}-byte boundary)",
          file.string(), s->name(), s->byte_offset(), end, kFileBlockBytes));
    end = std::max(end, s->byte_offset() + s->byte_length());
  }
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (!ec && static_cast<int64_t>(size) > end)
    problems.push_back(fmt::format("{} is {} bytes, but its last slice ends at byte {}",
                                   file.string(), size, end));
  return problems;
}

}  // namespace braid::ckpt
