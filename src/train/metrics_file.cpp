// metrics.jsonl and the TensorBoard event file of a run: lines in step order, each flushed,
// trimmed on resume so that no step appears twice.
#include "metrics_file.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/logging.h"
#include "tensorboard_reader.h"
#include "tensorboard_record.h"
#include "tensorboard_writer.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kEventPrefix = "events.out.tfevents.";
constexpr double kMiB = 1 << 20;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Writes `bytes` to `path` through a temporary beside it, so a crash leaves the old or the new.
void replace_file(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    BRAID_CHECK(out.good(), "cannot write {}: {}", tmp.string(), std::strerror(errno));
  }
  fs::rename(tmp, path);
}

// Drops the lines of steps after `first_step`, and a last line a crash cut short.
void trim_jsonl(const fs::path& path, int64_t first_step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  BRAID_CHECK(in.good(), "cannot read {}: {}", path.string(), std::strerror(errno));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string kept;
  bool dropped = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") ||
        !j["step"].is_number_integer()) {
      BRAID_CHECK(i + 1 == lines.size(),
                  "{} line {} is not a metrics line (a JSON object with an integer \"step\"); "
                  "only the last line can be cut short by a crash: remove the file or set "
                  "another training.run_dir",
                  path.string(), i + 1);
      dropped = true;
      continue;
    }
    if (j["step"].get<int64_t>() > first_step) {
      dropped = true;
      continue;
    }
    kept += lines[i];
    kept += '\n';
  }
  if (dropped) replace_file(path, kept);
}

// Whether an event of an earlier run stays when a run starts from `first_step`.
bool event_kept(const tensorboard::proto::Event& event, int64_t first_step) {
  if (!event.has_summary()) return true;  // the file_version event
  return first_step > 0 && event.step() <= first_step;
}

// The same trim for every event file in `dir`: a file left with no summary is removed. Returns
// the steps whose val/loss the kept events hold.
std::set<int64_t> trim_event_files(const fs::path& dir, int64_t first_step) {
  std::set<int64_t> val_steps;
  std::vector<fs::path> files;  // listed first: the loop below removes and replaces files
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename().string().rfind(kEventPrefix, 0) == 0)
      files.push_back(entry.path());
  for (const fs::path& file : files) {
    bool cut = false;
    const std::vector<tensorboard::proto::Event> events =
        read_tensorboard_events(file.string(), &cut);
    std::string kept;
    bool dropped = cut, summaries = false;
    for (const auto& event : events) {
      if (!event_kept(event, first_step)) {
        dropped = true;
        continue;
      }
      summaries = summaries || event.has_summary();
      for (const auto& value : event.summary().value())
        if (value.tag() == "val/loss") val_steps.insert(event.step());
      kept += frame_record(event.SerializeAsString());
    }
    if (!summaries) {
      fs::remove(file);
    } else if (dropped) {
      replace_file(file, kept);
    }
  }
  return val_steps;
}

std::vector<std::pair<std::string, float>> step_scalars(const StepMetrics& m) {
  std::vector<std::pair<std::string, float>> v = {
      {"train/loss", m.loss},
      {"train/lr", m.lr},
      {"train/grad_norm", static_cast<float>(m.grad_norm)},
      {"train/tokens_per_s", static_cast<float>(m.tokens_per_s)},
      {"train/mfu", static_cast<float>(m.mfu)},
      {"train/skipped", m.skipped ? 1.0f : 0.0f},
      {"time/step_ms", static_cast<float>(m.step_ms)},
      {"time/forward_ms", static_cast<float>(m.forward_ms)},
      {"time/backward_ms", static_cast<float>(m.backward_ms)},
      {"time/comm_wait_ms", static_cast<float>(m.comm_wait_ms)},
      {"time/optimizer_ms", static_cast<float>(m.optimizer_ms)},
      {"time/checkpoint_stall_ms", static_cast<float>(m.checkpoint_stall_ms)},
      {"memory/host_peak_mib", static_cast<float>(static_cast<double>(m.peak_bytes) / kMiB)},
  };
  if (m.on_device)
    v.emplace_back("memory/device_peak_mib",
                   static_cast<float>(static_cast<double>(m.device_peak_bytes) / kMiB));
  return v;
}

}  // namespace

MetricsFile::MetricsFile(const std::string& run_dir, int64_t first_step,
                         std::function<bool(int64_t)> val_due)
    : val_due_(std::move(val_due)) {
  BRAID_CHECK(!run_dir.empty(), "MetricsFile needs a folder (training.run_dir)");
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  BRAID_CHECK(!ec && fs::is_directory(run_dir), "cannot create training.run_dir {}: {}", run_dir,
              ec ? ec.message() : std::string("not a folder"));
  const fs::path jsonl = fs::path(run_dir) / "metrics.jsonl";
  jsonl_path_ = jsonl.string();
  trim_jsonl(jsonl, first_step);
  kept_val_steps_ = trim_event_files(run_dir, first_step);
  jsonl_ = std::fopen(jsonl_path_.c_str(), "a");
  BRAID_CHECK(jsonl_ != nullptr, "cannot open {} for appending: {}", jsonl_path_,
              std::strerror(errno));
  const auto seconds = static_cast<int64_t>(unix_now());
  event_path_ = (fs::path(run_dir) / tensorboard_file_name(seconds, host_name())).string();
  events_ = std::make_unique<TensorBoardWriter>(event_path_);
}

MetricsFile::~MetricsFile() {
  try {
    close();
  } catch (const std::exception& e) {
    log().error("closing the run's metrics: {}", e.what());
  }
}

void MetricsFile::add_step(const StepMetrics& m) {
  BRAID_CHECK(jsonl_ != nullptr, "MetricsFile::add_step after close()");
  const int64_t step = m.step + 1;
  events_->write_scalars(step, unix_now(), step_scalars(m));
  // A step still waiting had its validation skipped (a stop): it goes out without one.
  if (pending_) {
    write_line(*pending_, std::nullopt);
    pending_.reset();
  }
  val_losses_.erase(val_losses_.begin(), val_losses_.lower_bound(step));
  if (auto it = val_losses_.find(step); it != val_losses_.end()) {
    write_line(m, it->second);
    val_losses_.erase(it);
  } else if (val_due_ && val_due_(step)) {
    pending_ = m;
  } else {
    write_line(m, std::nullopt);
  }
}

void MetricsFile::add_val(int64_t step, float loss) {
  BRAID_CHECK(jsonl_ != nullptr, "MetricsFile::add_val after close()");
  // A run resumed at its last step validates the same weights again: recorded already.
  if (!kept_val_steps_.count(step)) events_->write_scalars(step, unix_now(), {{"val/loss", loss}});
  if (pending_ && pending_->step + 1 == step) {
    write_line(*pending_, loss);
    pending_.reset();
  } else {
    val_losses_[step] = loss;
  }
}

void MetricsFile::close() {
  if (!jsonl_) return;
  if (pending_) {
    const StepMetrics m = *pending_;
    pending_.reset();
    write_line(m, std::nullopt);
  }
  std::fclose(jsonl_);
  jsonl_ = nullptr;
  events_.reset();
}

void MetricsFile::write_line(const StepMetrics& m, std::optional<float> val) {
  // Ordered: the fields in the order docs/metrics.md lists them. Non-finite numbers are null.
  nlohmann::ordered_json j;
  j["step"] = m.step + 1;
  j["loss"] = m.loss;
  j["val_loss"] = val ? nlohmann::ordered_json(*val) : nlohmann::ordered_json(nullptr);
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["tokens_per_s"] = m.tokens_per_s;
  j["mfu"] = m.mfu;
  j["step_ms"] = m.step_ms;
  j["forward_ms"] = m.forward_ms;
  j["backward_ms"] = m.backward_ms;
  j["comm_wait_ms"] = m.comm_wait_ms;
  j["optimizer_ms"] = m.optimizer_ms;
  j["checkpoint_stall_ms"] = m.checkpoint_stall_ms;
  j["host_peak_bytes"] = m.peak_bytes;
  j["device_peak_bytes"] =
      m.on_device ? nlohmann::ordered_json(m.device_peak_bytes) : nlohmann::ordered_json(nullptr);
  j["skipped"] = m.skipped;
  j["wall_time"] = unix_now();
  const std::string line = j.dump() + "\n";
  BRAID_CHECK(
      std::fwrite(line.data(), 1, line.size(), jsonl_) == line.size() && std::fflush(jsonl_) == 0,
      "writing {} failed: {}", jsonl_path_, std::strerror(errno));
}

}  // namespace braid::train
