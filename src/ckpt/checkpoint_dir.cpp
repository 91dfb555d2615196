// Retention, the start-up sweep and the resume scan of a checkpoint directory.
#include "checkpoint_dir.h"

#include <fmt/format.h>

#include <fstream>

#include "braid/ckpt/run_lock.h"
#include "braid/core/logging.h"
#include "fault_injection.h"

namespace braid::ckpt {

void remove_checkpoint(const fs::path& folder) {
  std::error_code ec;
  fs::remove(folder / kManifestFile, ec);
  BRAID_CHECK(!ec, "cannot remove {}: {}", (folder / kManifestFile).string(), ec.message());
  fsync_folder(folder);  // uncommitted for good before any of its data goes
  crash_if_requested("retention", step_of_folder(folder.filename().string()), 0);
  fs::remove_all(folder, ec);
  BRAID_CHECK(!ec, "cannot remove {}: {}", folder.string(), ec.message());
}

std::vector<std::string> sweep_uncommitted(const fs::path& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool tmp_folder = name.size() > 4 && name.ends_with(".tmp") &&
                            step_of_folder(name.substr(0, name.size() - 4)) >= 0;
    const bool uncommitted = step_of_folder(name) >= 0 && entry.is_directory() &&
                             !fs::exists(entry.path() / kManifestFile);
    const bool latest_tmp = name == std::string(kLatestFile) + ".tmp";
    if (!tmp_folder && !uncommitted && !latest_tmp) continue;
    fs::remove_all(entry.path(), ec);
    BRAID_CHECK(!ec, "cannot remove the uncommitted {}: {}", entry.path().string(), ec.message());
    removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  if (!removed.empty()) fsync_folder(dir);
  return removed;
}

void remove_all_checkpoints(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  // Committed ones uncommitted first, so that a crash midway leaves nothing half-deleted that
  // looks loadable.
  for (const fs::path& folder : committed_checkpoints(dir)) remove_checkpoint(folder);
  fs::remove(dir / kLatestFile, ec);
  sweep_uncommitted(dir);
}

std::string printable(const std::string& text, size_t limit) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= limit) return out + "...";
    out +=
        c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return out;
}

namespace {

// What `latest` names, or "" when it is missing; a warning when it is not a step folder name.
std::string latest_hint(const fs::path& dir) {
  std::ifstream in(dir / kLatestFile, std::ios::binary);
  if (!in.good()) return "";
  std::string text(std::istreambuf_iterator<char>(in), {});
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (step_of_folder(text) < 0) {
    log().warn("{} holds \"{}\", not a checkpoint name like step_00000100; ignoring it",
               (dir / kLatestFile).string(), printable(text));
    return "";
  }
  return text;
}

}  // namespace

std::vector<fs::path> resume_candidates(const fs::path& path, bool all) {
  if (fs::exists(path / kManifestFile)) return {path};
  std::vector<fs::path> committed = committed_checkpoints(path);
  const std::string hint = latest_hint(path);
  if (!committed.empty() && !hint.empty() && committed.back().filename() != hint) {
    if (fs::exists(path / hint / kManifestFile))
      log().info(
          "{} names {}, but {} is newer and committed (a crash before `latest` was updated): "
          "taking the newer one",
          (path / kLatestFile).string(), hint, committed.back().filename().string());
    else
      log().warn("{} names {}, which is not a committed checkpoint; taking the newest one, {}",
                 (path / kLatestFile).string(), hint, committed.back().filename().string());
  }
  std::vector<fs::path> out(committed.rbegin(), committed.rend());
  if (!all && out.size() > 1) out.resize(1);
  return out;
}

}  // namespace braid::ckpt
