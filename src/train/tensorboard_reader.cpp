// The TensorBoard event file reader: TFRecord framing checked record by record.
#include "tensorboard_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "braid/core/error.h"
#include "tensorboard_record.h"

namespace braid::train {

namespace {

uint64_t get_le(const std::string& bytes, size_t at, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

}  // namespace

std::vector<tensorboard::proto::Event> read_tensorboard_events(const std::string& path,
                                                               bool* truncated_tail) {
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK(in.good(), "cannot open the TensorBoard event file {}: {}", path,
              std::strerror(errno));
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  BRAID_CHECK(!in.bad(), "reading {} failed: {}", path, std::strerror(errno));
  if (truncated_tail) *truncated_tail = false;

  std::vector<tensorboard::proto::Event> events;
  size_t at = 0;
  for (size_t record = 0; at < bytes.size(); ++record) {
    const size_t left = bytes.size() - at;
    const bool header_cut = left < kRecordHeaderBytes;
    const uint64_t length = header_cut ? 0 : get_le(bytes, at, 8);
    if (!header_cut) {
      const uint32_t stored = static_cast<uint32_t>(get_le(bytes, at + 8, 4));
      const uint32_t computed = masked_crc32c(bytes.data() + at, 8);
      BRAID_CHECK(stored == computed,
                  "{}: record {} at byte {} fails the CRC of its length (stored {:#010x}, "
                  "computed {:#010x}): the file is corrupt",
                  path, record, at, stored, computed);
    }
    if (header_cut || left < kRecordHeaderBytes + kRecordFooterBytes ||
        length > left - kRecordHeaderBytes - kRecordFooterBytes) {
      BRAID_CHECK(truncated_tail != nullptr,
                  "{}: the file ends inside record {} at byte {} ({} bytes left, the record "
                  "needs {}): the write was cut short",
                  path, record, at, left,
                  header_cut ? std::string("at least 16")
                             : std::to_string(length + kRecordHeaderBytes + kRecordFooterBytes));
      *truncated_tail = true;
      break;
    }
    const char* data = bytes.data() + at + kRecordHeaderBytes;
    const uint32_t stored =
        static_cast<uint32_t>(get_le(bytes, at + kRecordHeaderBytes + length, 4));
    const uint32_t computed = masked_crc32c(data, length);
    BRAID_CHECK(stored == computed,
                "{}: record {} at byte {} fails the CRC of its {} data bytes (stored {:#010x}, "
                "computed {:#010x}): the file is corrupt",
                path, record, at, length, stored, computed);
    tensorboard::proto::Event& event = events.emplace_back();
    BRAID_CHECK(event.ParseFromArray(data, static_cast<int>(length)),
                "{}: record {} at byte {} passes its CRCs but is not a TensorBoard Event", path,
                record, at);
    at += kRecordHeaderBytes + length + kRecordFooterBytes;
  }
  return events;
}

}  // namespace braid::train
