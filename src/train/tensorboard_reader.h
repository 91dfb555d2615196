// Reads a TensorBoard event file back, checking both CRCs of every record.
#pragma once

#include <string>
#include <vector>

#include "proto/tensorboard_event.pb.h"

namespace braid::train {

// Every event of the file at `path`, in file order. A record whose length or data fails its
// masked CRC-32C, a record that does not parse as an Event, or a file that ends inside a record
// is an error naming the record and its byte offset. With `truncated_tail` given, a file that
// ends inside its last record (a crash cut the write) returns the events before it and sets
// *truncated_tail instead; CRC failures are errors either way.
std::vector<tensorboard::proto::Event> read_tensorboard_events(const std::string& path,
                                                               bool* truncated_tail = nullptr);

}  // namespace braid::train
