// CRC-32C (Castagnoli), the checksum of checkpoint chunks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::ckpt {

// CRC-32C of `size` bytes, continuing from `crc` (0 for a fresh checksum).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// The same with the byte-wise table only: the reference the hardware path is tested against.
uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace braid::ckpt
