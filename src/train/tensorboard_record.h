// The TFRecord framing of a TensorBoard event file: length, masked CRC-32C of it, data, masked
// CRC-32C of the data (TensorFlow's record format, which TensorBoard reads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace braid::train {

// CRC-32C of `size` bytes, masked as TFRecord stores it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
// The mask keeps a CRC of data that itself holds CRCs from being trivially zero.
uint32_t masked_crc32c(const void* data, size_t size);

// The bytes of one record holding `data`: uint64 length (little-endian), uint32 masked CRC-32C
// of those 8 bytes, the data, uint32 masked CRC-32C of the data (little-endian).
std::string frame_record(std::string_view data);

// Bytes a record adds around its data: 8 + 4 before, 4 after.
constexpr size_t kRecordHeaderBytes = 12;
constexpr size_t kRecordFooterBytes = 4;

}  // namespace braid::train
