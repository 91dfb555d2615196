// braid-ckpt helpers shared by the subcommands: arguments, manifest grouping, box checks,
// coverage of a tensor by its slices, and assembling a whole tensor from its slices.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "braid/ckpt/checkpoint.h"
#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "ckpt/format.h"
#include "commands.h"

namespace braid::ckpt_tool {

Args parse_args(const std::vector<std::string>& args, const std::set<std::string>& switches,
                const std::set<std::string>& valued, size_t positionals, const std::string& usage) {
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (!arg.starts_with("--")) {
      out.positional.push_back(arg);
      continue;
    }
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (switches.count(arg) && eq == std::string::npos) {
      out.flags[arg] = "";
    } else if (valued.count(arg)) {
      if (eq == std::string::npos) {
        if (i + 1 >= args.size())
          throw UsageError(fmt::format("flag {} needs a value; usage: {}", arg, usage));
        value = args[++i];
      }
      out.flags[arg] = value;
    } else {
      throw UsageError(fmt::format("unknown argument '{}'; usage: {}", args[i], usage));
    }
  }
  if (out.positional.size() != positionals)
    throw UsageError(fmt::format("expected {} path argument{}, got {}; usage: {}", positionals,
                                 positionals == 1 ? "" : "s", out.positional.size(), usage));
  return out;
}

Checkpoint open_checkpoint(const std::string& path) {
  Checkpoint c;
  c.folder = ckpt::resolve_checkpoint(path);
  ckpt::read_message(c.folder / ckpt::kManifestFile, c.manifest);
  return c;
}

std::optional<train::TrainConfig> stored_config(const Checkpoint& c) {
  if (c.manifest.config().empty()) return std::nullopt;
  return train::parse_config(c.manifest.config(),
                             (c.folder / ckpt::kManifestFile).string() + " (config)");
}

namespace {

// Model tensors sort first, optimizer state next, anything else last.
int group_rank(const std::string& name) {
  if (name.starts_with("model/")) return 0;
  if (name.starts_with("optim/")) return 1;
  return 2;
}

}  // namespace

std::vector<TensorSlices> group_by_tensor(const proto::Manifest& manifest) {
  std::map<std::string, std::vector<const proto::TensorSlice*>> by_name;
  for (const auto& slice : manifest.tensors()) by_name[slice.name()].push_back(&slice);
  std::vector<TensorSlices> out;
  for (auto& [name, slices] : by_name) out.push_back({name, std::move(slices)});
  std::stable_sort(out.begin(), out.end(), [](const TensorSlices& a, const TensorSlices& b) {
    return group_rank(a.name) < group_rank(b.name);
  });
  return out;
}

Shape global_shape_of(const proto::TensorSlice& slice) {
  return Shape(slice.global_shape().begin(), slice.global_shape().end());
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t v : shape) n *= v;
  return n;
}

int64_t element_bytes(const std::string& dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "bf16" || dtype == "f16") return 2;
  if (dtype == "i64") return 8;
  if (dtype == "u8") return 1;
  return 0;
}

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string index_text(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return shape_str(index);
}

std::vector<std::string> box_problems(const proto::TensorSlice& slice) {
  std::vector<std::string> out;
  const size_t dims = static_cast<size_t>(slice.block_shape_size());
  if (static_cast<size_t>(slice.offsets_size()) != dims ||
      static_cast<size_t>(slice.sizes_size()) != dims) {
    out.push_back(fmt::format("block shape, offsets and sizes have {}, {} and {} dims", dims,
                              slice.offsets_size(), slice.sizes_size()));
    return out;
  }
  const Shape block(slice.block_shape().begin(), slice.block_shape().end());
  if (numel_of(block) != numel_of(global_shape_of(slice)))
    out.push_back(fmt::format("block shape {} does not regroup the global shape {}",
                              shape_str(block), shape_str(global_shape_of(slice))));
  for (size_t d = 0; d < dims; ++d) {
    const int64_t offset = slice.offsets(static_cast<int>(d)),
                  size = slice.sizes(static_cast<int>(d));
    if (offset < 0 || size < 0 || offset + size > block[d])
      out.push_back(fmt::format("box of {} at {} leaves the block shape {} in dim {}", size, offset,
                                shape_str(block), d));
  }
  const int64_t element = element_bytes(slice.dtype());
  if (element == 0)
    out.push_back(fmt::format("unknown dtype '{}'", slice.dtype()));
  else if (out.empty() && slice.byte_length() != ckpt::spec_of(slice).local_numel() * element)
    out.push_back(fmt::format("{} bytes stored for {} values of {}", slice.byte_length(),
                              ckpt::spec_of(slice).local_numel(), slice.dtype()));
  return out;
}

namespace {

// Adds one (saturating at 2) to the count of every global element `box` covers. The last dim
// of a box is a contiguous run of global indices, so each run costs one index computation.
void add_box(const nn::ShardSpec& box, std::vector<uint8_t>& counts) {
  const int64_t run = box.sizes.empty() ? 1 : box.sizes.back();
  if (run == 0) return;
  for (int64_t i = 0; i < box.local_numel(); i += run) {
    uint8_t* first = counts.data() + box.global_index(i);
    for (int64_t k = 0; k < run; ++k) first[k] = static_cast<uint8_t>(std::min(first[k] + 1, 2));
  }
}

}  // namespace

Coverage coverage_of(const Shape& global_shape, const std::vector<nn::ShardSpec>& boxes) {
  std::vector<uint8_t> counts(static_cast<size_t>(numel_of(global_shape)), 0);
  for (const auto& box : boxes) add_box(box, counts);
  Coverage c;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0 && c.uncovered++ == 0) c.first_uncovered = static_cast<int64_t>(i);
    if (counts[i] > 1 && c.overlapped++ == 0) c.first_overlapped = static_cast<int64_t>(i);
  }
  return c;
}

BoxSet distinct_boxes(const TensorSlices& t) {
  BoxSet out;
  std::map<std::string, const proto::TensorSlice*> seen;  // box text -> first slice with it
  for (const proto::TensorSlice* slice : t.slices) {
    const std::string key = ckpt::spec_of(*slice).str();
    auto [it, inserted] = seen.emplace(key, slice);
    if (inserted)
      out.distinct.push_back(slice);
    else
      out.repeats.emplace_back(it->second, slice);
  }
  return out;
}

bool same_contents(const proto::TensorSlice& a, const proto::TensorSlice& b) {
  return a.dtype() == b.dtype() && a.byte_length() == b.byte_length() &&
         std::equal(a.chunk_crc32c().begin(), a.chunk_crc32c().end(), b.chunk_crc32c().begin(),
                    b.chunk_crc32c().end());
}

Tensor assemble_tensor(const fs::path& folder, const TensorSlices& t) {
  const Shape shape = global_shape_of(*t.slices.front());
  const BoxSet boxes = distinct_boxes(t);
  std::vector<nn::ShardSpec> specs;
  for (const proto::TensorSlice* slice : boxes.distinct) {
    BRAID_CHECK(global_shape_of(*slice) == shape,
                "tensor '{}': slices disagree on its shape ({} vs {})", t.name, shape_str(shape),
                shape_str(global_shape_of(*slice)));
    BRAID_CHECK(slice->dtype() == "f32", "tensor '{}' is stored as {}; braid-ckpt exports f32",
                t.name, slice->dtype());
    const auto problems = box_problems(*slice);
    BRAID_CHECK(problems.empty(), "tensor '{}' in {}: {}", t.name, slice->file(), problems.front());
    specs.push_back(ckpt::spec_of(*slice));
  }
  for (const auto& [first, repeat] : boxes.repeats)
    BRAID_CHECK(same_contents(*first, *repeat),
                "tensor '{}': box {} is stored in {} and {} with different values", t.name,
                ckpt::spec_of(*first).str(), first->file(), repeat->file());
  const Coverage c = coverage_of(shape, specs);
  BRAID_CHECK(c.uncovered == 0 && c.overlapped == 0,
              "tensor '{}': its slices do not tile it exactly once ({} elements in no slice, {} "
              "in several; braid-ckpt verify lists the details)",
              t.name, c.uncovered, c.overlapped);
  Tensor whole = Tensor::zeros(shape);
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<char> bytes = ckpt::read_slice(folder, *boxes.distinct[i]);
    Tensor values = Tensor::empty({specs[i].local_numel()});
    std::memcpy(values.data_ptr(), bytes.data(), bytes.size());
    specs[i].place(values, whole);
  }
  return whole;
}

}  // namespace braid::ckpt_tool
