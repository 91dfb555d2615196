// braid-ckpt's subcommands and the checkpoint helpers they share (arguments, slice grouping).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/nn/shard_spec.h"
#include "braid/train/config.h"
#include "proto/checkpoint.pb.h"

namespace braid::ckpt_tool {

namespace fs = std::filesystem;
namespace proto = ckpt::proto;

// Each subcommand takes the arguments after its name and returns the process exit code.
int run_inspect(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_convert(const std::vector<std::string>& args);
int run_import(const std::vector<std::string>& args);

// A subcommand's arguments: positionals in order, flags by name ("--config").
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // switches map to ""
  bool has(const std::string& flag) const { return flags.count(flag) != 0; }
};
// Splits `args`; `switches` take no value, `valued` take one ("--x V" or "--x=V"). Anything
// else starting with "--", a valued flag without its value and a positional count other than
// `positionals` throw braid::UsageError (`usage` is quoted in each).
Args parse_args(const std::vector<std::string>& args, const std::set<std::string>& switches,
                const std::set<std::string>& valued, size_t positionals, const std::string& usage);

// A committed checkpoint: its folder and its global manifest.
struct Checkpoint {
  fs::path folder;
  proto::Manifest manifest;
};
// Resolves a step folder or a checkpoint directory with `latest`, and reads the manifest.
Checkpoint open_checkpoint(const std::string& path);

// The training config the manifest records, parsed (defaults filled in); nullopt when it records
// none. Throws braid::Error naming "<manifest> (config)" and the line when the text no longer
// parses, e.g. a field renamed since it was written. verify and export share it so they judge
// a stored config alike.
std::optional<train::TrainConfig> stored_config(const Checkpoint& c);

// The slices of one tensor ("model/<param>" or "optim/<param>/<state>").
struct TensorSlices {
  std::string name;
  std::vector<const proto::TensorSlice*> slices;
};
// Every tensor of `manifest`: model tensors first, then optimizer state, then anything else,
// each group sorted by name. Pointers refer into `manifest`.
std::vector<TensorSlices> group_by_tensor(const proto::Manifest& manifest);

Shape global_shape_of(const proto::TensorSlice& slice);
int64_t numel_of(const Shape& shape);
// Bytes per element of a stored dtype name ("f32", "bf16", ...); 0 for an unknown name.
int64_t element_bytes(const std::string& dtype);
std::string human_bytes(int64_t bytes);  // "1.5 MiB"
// The multi-index of flat row-major index `flat` in `shape`: "[3, 17]".
std::string index_text(int64_t flat, const Shape& shape);

// Problems with a slice's box itself (dimension counts, element counts, bounds, byte length),
// so that placing it cannot go out of bounds. Empty when the box is well formed.
std::vector<std::string> box_problems(const proto::TensorSlice& slice);

// How the distinct boxes of a tensor cover its global elements: counts saturate at 2.
struct Coverage {
  int64_t uncovered = 0, overlapped = 0;
  int64_t first_uncovered = -1, first_overlapped = -1;  // flat global indices
};
Coverage coverage_of(const Shape& global_shape, const std::vector<nn::ShardSpec>& boxes);

// A tensor's slices split into one per distinct box (the first seen) and the later slices that
// repeat a box already seen, each paired with that first one.
struct BoxSet {
  std::vector<const proto::TensorSlice*> distinct;
  std::vector<std::pair<const proto::TensorSlice*, const proto::TensorSlice*>> repeats;
};
BoxSet distinct_boxes(const TensorSlices& t);
// Same length and the same chunk checksums: the stored values are the same.
bool same_contents(const proto::TensorSlice& a, const proto::TensorSlice& b);

// The whole single-process f32 tensor `t` stores: zeros, then every slice placed (checksums
// verified). Throws when a slice is malformed or the slices do not tile the tensor exactly.
Tensor assemble_tensor(const fs::path& folder, const TensorSlices& t);

}  // namespace braid::ckpt_tool
