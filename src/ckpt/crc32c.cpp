// CRC-32C: the SSE4.2 crc32 instruction where the CPU has it, else a byte-wise table. Every
// checkpoint byte is checksummed, so the hardware path runs three independent lanes: one
// crc32 instruction has a latency of three cycles but issues every cycle, and a single chain
// of them keeps only a third of that throughput.
#include "braid/ckpt/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace braid::ckpt {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reversed

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

// Every variant works on the inverted register; crc32c() inverts before and after.
uint32_t table_crc(const unsigned char* p, size_t size, uint32_t crc) {
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

// The register after `bytes` zero bytes, as a function of the register before: linear over
// GF(2), so four 256-entry tables (one per byte of the register) hold it.
class ZeroShift {
 public:
  explicit ZeroShift(size_t bytes) {
    // The image of each single-bit register: the table CRC run over the zero bytes.
    std::array<uint32_t, 32> bit{};
    for (int b = 0; b < 32; ++b) {
      uint32_t c = 1u << b;
      for (size_t i = 0; i < bytes; ++i) c = kTable[c & 0xFF] ^ (c >> 8);
      bit[b] = c;
    }
    for (int k = 0; k < 4; ++k)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t image = 0;
        for (int b = 0; b < 8; ++b)
          if (v & (1u << b)) image ^= bit[8 * k + b];
        table_[k][v] = image;
      }
  }
  uint32_t operator()(uint32_t crc) const {
    return table_[0][crc & 0xFF] ^ table_[1][(crc >> 8) & 0xFF] ^ table_[2][(crc >> 16) & 0xFF] ^
           table_[3][crc >> 24];
  }

 private:
  std::array<std::array<uint32_t, 256>, 4> table_{};
};

#if defined(__x86_64__)
constexpr size_t kLaneBytes = 4096;  // each of the three lanes of one block

const ZeroShift& shift_past_lane() {
  static const ZeroShift shift(kLaneBytes);  // built on first use
  return shift;
}

__attribute__((target("sse4.2"))) uint64_t chain(const unsigned char* p, size_t words, uint64_t c) {
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, p + 8 * i, 8);
    c = _mm_crc32_u64(c, word);
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t hardware_crc(const unsigned char* p, size_t size,
                                                        uint32_t crc) {
  // Blocks of three lanes checksummed side by side. The register is linear in its start
  // value, so lane b's and lane c's (started from 0) combine with lane a's by shifting each
  // earlier result past the bytes that follow it.
  constexpr size_t lane_words = kLaneBytes / 8;
  const ZeroShift& shift = shift_past_lane();
  for (; size >= 3 * kLaneBytes; size -= 3 * kLaneBytes, p += 3 * kLaneBytes) {
    uint64_t a = crc, b = 0, c = 0;
    for (size_t i = 0; i < lane_words; ++i) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, p + 8 * i, 8);
      std::memcpy(&wb, p + kLaneBytes + 8 * i, 8);
      std::memcpy(&wc, p + 2 * kLaneBytes + 8 * i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    crc = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^
          static_cast<uint32_t>(c);
  }
  uint32_t c32 = static_cast<uint32_t>(chain(p, size / 8, crc));
  p += size / 8 * 8;
  for (size %= 8; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

bool has_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (has_sse42()) return ~hardware_crc(p, size, ~crc);
#endif
  return ~table_crc(p, size, ~crc);
}

uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc) {
  return ~table_crc(static_cast<const unsigned char*>(data), size, ~crc);
}

}  // namespace braid::ckpt
