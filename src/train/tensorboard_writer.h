// Writes a TensorBoard event file (events.out.tfevents.<unix time>.<host>) of scalar summaries.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "proto/tensorboard_event.pb.h"

namespace braid::train {

// The name TensorBoard looks for: "events.out.tfevents.<unix seconds>.<host name>".
std::string tensorboard_file_name(int64_t unix_seconds, const std::string& host);

class TensorBoardWriter {
 public:
  // Creates (or appends to) the event file at `path`; a new file starts with the
  // file_version "brain.Event:2" event that TensorBoard expects first.
  explicit TensorBoardWriter(std::string path);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event, framed as a record and flushed to the file.
  void write(const tensorboard::proto::Event& event);
  // An event at `step` and `wall_time` (Unix seconds) with one simple_value per (tag, value).
  void write_scalars(int64_t step, double wall_time,
                     const std::vector<std::pair<std::string, float>>& values);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace braid::train
