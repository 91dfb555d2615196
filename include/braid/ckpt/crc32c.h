// CRC-32C (Castagnoli), the checksum of checkpoint chunks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::ckpt {

// CRC-32C of `size` bytes, continuing from `crc` (0 for a fresh checksum).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace braid::ckpt
