// The on-disk layout of checkpoints shared by the writer, the loader and braid-ckpt: folder and
// file names, durable writes, manifest files, and slices as nn::ShardSpec.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "braid/nn/shard_spec.h"
#include "proto/checkpoint.pb.h"

namespace braid::ckpt {

namespace fs = std::filesystem;

constexpr int kFormatVersion = 1;
constexpr int64_t kChunkBytes = 1 << 20;  // checksum granularity
// Every slice of a data file starts on a multiple of this, as direct I/O wants (it covers
// every common logical block size); zeros fill the gaps.
constexpr int64_t kFileBlockBytes = 4096;
constexpr int64_t round_up_to_block(int64_t bytes) {
  return (bytes + kFileBlockBytes - 1) / kFileBlockBytes * kFileBlockBytes;
}
constexpr const char* kManifestFile = "manifest.pb";
constexpr const char* kLatestFile = "latest";

std::string step_folder_name(int64_t step);  // "step_00000040"
std::string rank_data_file(int rank);        // "rank_00003.bin"
std::string rank_manifest_file(int rank);    // "rank_00003.manifest"
// Committed checkpoint folders under `dir` (those with a manifest), oldest first.
std::vector<fs::path> committed_checkpoints(const fs::path& dir);

// Writes `bytes` to `path` and fsyncs the file; replaces atomically when `atomic` (write to a
// temporary name, fsync, rename, fsync the folder).
void write_file(const fs::path& path, const std::string& bytes, bool atomic);
void fsync_folder(const fs::path& folder);
// Throws the error of a failed write: `what` ("writing", "fsync of", ...) `file`, how many of
// `total` bytes were done, and errno `error` in words, with a hint when the disk is full;
// `note` is appended (an injected fault says so).
[[noreturn]] void fail_write(std::string_view what, const fs::path& file, int64_t done,
                             int64_t total, int error, std::string_view note = "");
void write_message(const fs::path& path, const google::protobuf::Message& message);
// Parses a message; a missing, unreadable or malformed file is an error naming it.
void read_message(const fs::path& path, google::protobuf::Message& message);

nn::ShardSpec spec_of(const proto::TensorSlice& slice);
void set_spec(proto::TensorSlice& slice, const nn::ShardSpec& spec);

// Reads a slice's bytes from its file in `folder`, checking the file's size and every chunk's
// checksum; errors name the file, the tensor and the chunk.
std::vector<char> read_slice(const fs::path& folder, const proto::TensorSlice& slice);

}  // namespace braid::ckpt
