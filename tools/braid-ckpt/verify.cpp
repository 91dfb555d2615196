// braid-ckpt verify: reads every slice (sizes, checksums, padding) and every manifest (checksums),
// checks that each data file holds nothing but its slices, that each tensor's slices tile it
// exactly once and that the rank manifests agree; reports every problem, not the first.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "braid/core/error.h"
#include "ckpt/format.h"
#include "commands.h"

namespace braid::ckpt_tool {
namespace {

constexpr const char* kUsage = "braid-ckpt verify PATH [--verbose]";

struct Findings {
  std::vector<std::string> problems;
  // Boxes stored more than once with the same values: normal for parameters replicated over
  // tensor-parallel ranks (each writes its copy), so summarised unless --verbose.
  std::vector<std::string> duplicates;
  std::set<std::string> duplicated_tensors;
  std::set<std::string> missing_files;  // reported once, their slices are not read
  int64_t bytes_verified = 0;
};

// Each referenced shard file must exist and come with its rank's manifest, which must list
// exactly the slices the global manifest says that file holds (the global one merges them).
void check_shard_files(const Checkpoint& c, Findings& f) {
  std::map<std::string, std::multiset<std::string>> slices_by_file;  // file -> serialized slices
  for (const auto& slice : c.manifest.tensors())
    slices_by_file[slice.file()].insert(slice.SerializeAsString());
  static const std::regex data_file(R"(rank_(\d+)\.bin)");
  for (const auto& [file, expected] : slices_by_file) {
    if (!fs::exists(c.folder / file)) {
      f.problems.push_back(fmt::format("shard file {} is missing", (c.folder / file).string()));
      f.missing_files.insert(file);
    }
    std::smatch match;
    if (!std::regex_match(file, match, data_file)) {
      f.problems.push_back(
          fmt::format("shard file name '{}' names no rank (expected rank_N.bin)", file));
      continue;
    }
    const fs::path manifest_path = c.folder / ckpt::rank_manifest_file(std::stoi(match[1].str()));
    proto::RankManifest rank_manifest;
    try {
      ckpt::read_message(manifest_path, rank_manifest);
    } catch (const Error& e) {
      f.problems.push_back(e.what());
      continue;
    }
    std::multiset<std::string> listed;
    for (const auto& slice : rank_manifest.tensors()) listed.insert(slice.SerializeAsString());
    if (listed != expected)
      f.problems.push_back(fmt::format(
          "rank manifest {} lists {} slices that differ from the {} the global manifest "
          "places in {}",
          manifest_path.string(), listed.size(), expected.size(), file));
  }
}

// Every byte of a data file lies in a slice (checked by its chunk checksums) or in the zero
// padding after one (checked by read_slice): the slices must follow each other at block
// boundaries and the file must end with the last.
void check_data_file_layout(const Checkpoint& c, Findings& f) {
  std::map<std::string, std::vector<const proto::TensorSlice*>> by_file;
  for (const auto& slice : c.manifest.tensors()) by_file[slice.file()].push_back(&slice);
  for (const auto& [file, slices] : by_file) {
    if (f.missing_files.count(file)) continue;
    for (std::string& p : ckpt::data_file_problems(c.folder / file, slices))
      f.problems.push_back(std::move(p));
  }
}

// Slices of one tensor must agree on its shape and dtype and have well-formed boxes; the boxes
// found well formed are returned for the coverage check.
std::vector<const proto::TensorSlice*> well_formed_slices(const TensorSlices& t, Findings& f) {
  std::vector<const proto::TensorSlice*> out;
  const proto::TensorSlice& first = *t.slices.front();
  for (const proto::TensorSlice* slice : t.slices) {
    bool ok = true;
    if (global_shape_of(*slice) != global_shape_of(first) || slice->dtype() != first.dtype()) {
      f.problems.push_back(
          fmt::format("tensor '{}': a slice in {} is {} {} but another in {} is {} {}", t.name,
                      slice->file(), slice->dtype(), shape_str(global_shape_of(*slice)),
                      first.file(), first.dtype(), shape_str(global_shape_of(first))));
      ok = false;
    }
    for (const std::string& p : box_problems(*slice)) {
      f.problems.push_back(fmt::format("tensor '{}', slice in {} at byte {}: {}", t.name,
                                       slice->file(), slice->byte_offset(), p));
      ok = false;
    }
    if (ok) out.push_back(slice);
  }
  return out;
}

// Reads every slice: read_slice checks the file's size and every chunk's checksum.
void read_every_slice(const fs::path& folder, const TensorSlices& t, Findings& f) {
  for (const proto::TensorSlice* slice : t.slices) {
    if (f.missing_files.count(slice->file())) continue;
    try {
      f.bytes_verified += static_cast<int64_t>(ckpt::read_slice(folder, *slice).size());
    } catch (const Error& e) {
      f.problems.push_back(e.what());
    }
  }
}

// Every global element covered by exactly one box; a box stored twice with the same values is
// only a warning (it loads the same either way), with different values a problem.
void check_tiling(const TensorSlices& t, const std::vector<const proto::TensorSlice*>& slices,
                  Findings& f) {
  if (slices.size() != t.slices.size()) return;  // malformed slices were reported already
  const BoxSet boxes = distinct_boxes(t);
  for (const auto& [first, repeat] : boxes.repeats) {
    const std::string where =
        fmt::format("tensor '{}': box {} is stored in both {} (byte {}) and {} (byte {})", t.name,
                    ckpt::spec_of(*first).str(), first->file(), first->byte_offset(),
                    repeat->file(), repeat->byte_offset());
    if (same_contents(*first, *repeat)) {
      f.duplicates.push_back(where + " with identical values");
      f.duplicated_tensors.insert(t.name);
    } else {
      f.problems.push_back(where + " with different values");
    }
  }
  std::vector<nn::ShardSpec> specs;
  for (const proto::TensorSlice* slice : boxes.distinct) specs.push_back(ckpt::spec_of(*slice));
  const Shape shape = global_shape_of(*t.slices.front());
  const Coverage c = coverage_of(shape, specs);
  if (c.uncovered > 0)
    f.problems.push_back(fmt::format(
        "tensor '{}' {}: {} of {} elements are in no slice (the first at {})", t.name,
        shape_str(shape), c.uncovered, numel_of(shape), index_text(c.first_uncovered, shape)));
  if (c.overlapped > 0)
    f.problems.push_back(
        fmt::format("tensor '{}' {}: {} elements are in more than one slice (the first at {})",
                    t.name, shape_str(shape), c.overlapped, index_text(c.first_overlapped, shape)));
}

// Optimizer state belongs to a stored parameter with a recorded update count (loading needs it).
void check_optimizer_state(const Checkpoint& c, const std::vector<TensorSlices>& tensors,
                           Findings& f) {
  std::set<std::string> params, reported;
  for (const TensorSlices& t : tensors)
    if (t.name.starts_with("model/")) params.insert(t.name.substr(6));
  for (const TensorSlices& t : tensors) {
    if (!t.name.starts_with("optim/")) continue;
    const std::string param = t.name.substr(6, t.name.rfind('/') - 6);
    if (!reported.insert(param).second) continue;
    if (!params.count(param))
      f.problems.push_back(
          fmt::format("optimizer state '{}' has no parameter 'model/{}'", t.name, param));
    if (!c.manifest.param_steps().count(param))
      f.problems.push_back(
          fmt::format("parameter '{}' has optimizer state but no update count", param));
  }
}

void check_header(const Checkpoint& c, Findings& f) {
  if (c.manifest.format_version() != ckpt::kFormatVersion)
    f.problems.push_back(fmt::format("{} has format version {}; this build reads version {}",
                                     (c.folder / ckpt::kManifestFile).string(),
                                     c.manifest.format_version(), ckpt::kFormatVersion));
  if (c.manifest.tensors_size() == 0)
    f.problems.push_back(
        fmt::format("{} lists no tensors", (c.folder / ckpt::kManifestFile).string()));
}

// The stored training config must still parse: export reads the vocabulary size from it, and
// it is the record of how the checkpoint was trained. None recorded is not a problem here
// (export then takes --vocab-size).
void check_config(const Checkpoint& c, Findings& f) {
  try {
    stored_config(c);
  } catch (const Error& e) {
    f.problems.push_back(e.what());
  }
}

void print_duplicates(const Findings& f, bool verbose) {
  if (verbose) {
    for (const std::string& d : f.duplicates) fmt::print("warning: {}\n", d);
    return;
  }
  if (f.duplicated_tensors.empty()) return;
  std::vector<std::string> some(f.duplicated_tensors.begin(), f.duplicated_tensors.end());
  const size_t total = some.size();
  some.resize(std::min<size_t>(total, 3));
  fmt::print(
      "warning: {} tensor{} stored more than once with identical values (replicated parameters: "
      "each tensor-parallel rank writes its copy), e.g. {}{}; --verbose lists every copy\n",
      total, total == 1 ? " is" : "s are", fmt::join(some, ", "),
      total > some.size() ? ", ..." : "");
}

}  // namespace

int run_verify(const std::vector<std::string>& args) {
  const Args a = parse_args(args, {"--verbose"}, {}, 1, kUsage);
  const Checkpoint c = open_checkpoint(a.positional[0]);
  Findings f;
  check_header(c, f);
  check_config(c, f);
  check_shard_files(c, f);
  check_data_file_layout(c, f);
  const std::vector<TensorSlices> tensors = group_by_tensor(c.manifest);
  for (const TensorSlices& t : tensors) {
    const auto slices = well_formed_slices(t, f);
    read_every_slice(c.folder, t, f);
    check_tiling(t, slices, f);
  }
  check_optimizer_state(c, tensors, f);
  print_duplicates(f, a.has("--verbose"));
  if (f.problems.empty()) {
    fmt::print("OK: {} tensors, {} bytes verified ({})\n", tensors.size(), f.bytes_verified,
               c.folder.string());
    return 0;
  }
  for (const std::string& p : f.problems) fmt::print(stderr, "error: {}\n", p);
  fmt::print(stderr, "FAILED: {}: {} problem{} in {} tensors\n", c.folder.string(),
             f.problems.size(), f.problems.size() == 1 ? "" : "s", tensors.size());
  return 1;
}

}  // namespace braid::ckpt_tool
