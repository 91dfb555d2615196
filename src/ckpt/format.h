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

// 2: manifests end in a CRC-32C of their contents (1 had none).
constexpr int kFormatVersion = 2;
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
// The step a checkpoint folder name stands for ("step_00000040" -> 40); -1 for any other name
// (a "step_N.tmp" being written, a file of the user's).
int64_t step_of_folder(const std::string& name);
// Committed checkpoint folders under `dir` (step_<N> folders with a manifest), oldest first.
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
// Manifest files: the serialised message followed by its CRC-32C and a tag, written atomically.
void write_message(const fs::path& path, const google::protobuf::Message& message);
// Parses a manifest file; a missing, unreadable, damaged (checksum) or malformed file is an
// error naming it.
void read_message(const fs::path& path, google::protobuf::Message& message);

nn::ShardSpec spec_of(const proto::TensorSlice& slice);
void set_spec(proto::TensorSlice& slice, const nn::ShardSpec& spec);

// Reads a slice's bytes from its file in `folder`, checking the file's size, every chunk's
// checksum and that the padding up to the next block boundary is zero; errors name the file,
// the tensor and the chunk.
std::vector<char> read_slice(const fs::path& folder, const proto::TensorSlice& slice);
// What is wrong with the layout of data file `file` holding `slices` (all of its slices): each
// must start at the block boundary after the previous one, and the file end with the last.
// With read_slice on every slice, every byte of the file is then checked.
std::vector<std::string> data_file_problems(const fs::path& file,
                                            std::vector<const proto::TensorSlice*> slices);

}  // namespace braid::ckpt
