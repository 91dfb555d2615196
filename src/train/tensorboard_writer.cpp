// The TensorBoard event file writer: serialised Events in TFRecord framing, flushed per event.
#include "tensorboard_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "braid/core/error.h"
#include "tensorboard_record.h"

namespace braid::train {

std::string tensorboard_file_name(int64_t unix_seconds, const std::string& host) {
  return fmt::format("events.out.tfevents.{}.{}", unix_seconds, host);
}

TensorBoardWriter::TensorBoardWriter(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const bool fresh =
      !std::filesystem::exists(path_, ec) || std::filesystem::file_size(path_, ec) == 0;
  file_ = std::fopen(path_.c_str(), "ab");
  BRAID_CHECK(file_ != nullptr, "cannot open the TensorBoard event file {} for writing: {}", path_,
              std::strerror(errno));
  if (!fresh) return;
  tensorboard::proto::Event version;
  version.set_wall_time(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  version.set_file_version("brain.Event:2");
  try {
    write(version);
  } catch (...) {
    std::fclose(file_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write(const tensorboard::proto::Event& event) {
  std::string data;
  BRAID_CHECK(event.SerializeToString(&data), "cannot serialise a TensorBoard event for {}", path_);
  const std::string record = frame_record(data);
  BRAID_CHECK(std::fwrite(record.data(), 1, record.size(), file_) == record.size() &&
                  std::fflush(file_) == 0,
              "writing the TensorBoard event file {} failed: {}", path_, std::strerror(errno));
}

void TensorBoardWriter::write_scalars(int64_t step, double wall_time,
                                      const std::vector<std::pair<std::string, float>>& values) {
  tensorboard::proto::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  auto* summary = event.mutable_summary();
  for (const auto& [tag, value] : values) {
    auto* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(value);
  }
  write(event);
}

}  // namespace braid::train
