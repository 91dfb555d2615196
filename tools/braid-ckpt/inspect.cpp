// braid-ckpt inspect: a checkpoint's metadata and a table of its tensors.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "commands.h"

namespace braid::ckpt_tool {
namespace {

constexpr const char* kUsage = "braid-ckpt inspect PATH [--config]";

// "tp=2 cp=1 pp=2 dp=1": the usual axes in order, then any others the manifest names.
std::string grid_text(const proto::Manifest& m) {
  std::string out;
  const std::vector<std::string> usual = {"tp", "cp", "pp", "dp"};
  for (const std::string& axis : usual)
    if (auto it = m.grid().find(axis); it != m.grid().end())
      out += fmt::format("{}={} ", axis, it->second);
  std::map<std::string, int32_t> others(m.grid().begin(), m.grid().end());
  for (const auto& [axis, size] : others)
    if (std::find(usual.begin(), usual.end(), axis) == usual.end())
      out += fmt::format("{}={} ", axis, size);
  return out.empty() ? "(none recorded)" : out.substr(0, out.size() - 1);
}

std::string time_text(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "(not recorded)";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return buffer;
}

// "1 file, 12345 bytes (12.1 KiB)" over the shard files the slices name; missing ones are named.
std::string shard_files_text(const Checkpoint& c) {
  std::set<std::string> files;
  for (const auto& slice : c.manifest.tensors()) files.insert(slice.file());
  int64_t total = 0;
  std::vector<std::string> missing;
  for (const std::string& file : files) {
    std::error_code ec;
    const auto size = fs::file_size(c.folder / file, ec);
    if (ec)
      missing.push_back(file);
    else
      total += static_cast<int64_t>(size);
  }
  std::string out = fmt::format("{} file{}, {} bytes ({})", files.size(),
                                files.size() == 1 ? "" : "s", total, human_bytes(total));
  if (!missing.empty()) out += fmt::format("; MISSING: {}", fmt::join(missing, ", "));
  return out;
}

void print_summary(const Checkpoint& c) {
  const proto::Manifest& m = c.manifest;
  const auto row = [](const char* key, const std::string& value) {
    fmt::print("{:<16} {}\n", key, value);
  };
  row("checkpoint", c.folder.string());
  row("format version", std::to_string(m.format_version()));
  row("step", std::to_string(m.step()));
  row("optimizer steps", std::to_string(m.optimizer_steps()));
  row("grid", grid_text(m));
  row("mode", m.mode().empty() ? "(not recorded)" : m.mode());
  row("created", time_text(m.created_unix()));
  row("sampler", fmt::format("seed {}, epoch {}, position {}", m.sampler().seed(),
                             m.sampler().epoch(), m.sampler().position()));
  row("shard files", shard_files_text(c));
}

void print_tensor_table(const std::vector<TensorSlices>& tensors) {
  struct Row {
    std::string name, shape, slices, bytes;
  };
  std::vector<Row> rows = {{"name", "shape", "slices", "bytes"}};
  int64_t total = 0;
  for (const TensorSlices& t : tensors) {
    int64_t bytes = 0;
    for (const auto* slice : t.slices) bytes += slice->byte_length();
    total += bytes;
    rows.push_back({t.name, shape_str(global_shape_of(*t.slices.front())),
                    std::to_string(t.slices.size()), std::to_string(bytes)});
  }
  size_t name_w = 0, shape_w = 0;
  for (const Row& r : rows) {
    name_w = std::max(name_w, r.name.size());
    shape_w = std::max(shape_w, r.shape.size());
  }
  fmt::print("\ntensors          {} ({} bytes, {})\n", tensors.size(), total, human_bytes(total));
  for (const Row& r : rows)
    fmt::print("  {:<{}}  {:<{}}  {:>6}  {:>12}\n", r.name, name_w, r.shape, shape_w, r.slices,
               r.bytes);
}

}  // namespace

int run_inspect(const std::vector<std::string>& args) {
  const Args a = parse_args(args, {"--config"}, {}, 1, kUsage);
  const Checkpoint c = open_checkpoint(a.positional[0]);
  print_summary(c);
  print_tensor_table(group_by_tensor(c.manifest));
  if (a.has("--config")) {
    fmt::print("\nconfig:\n{}",
               c.manifest.config().empty() ? "(not recorded)\n" : c.manifest.config());
  }
  return 0;
}

}  // namespace braid::ckpt_tool
