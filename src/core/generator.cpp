// Philox-4x32-10 and the uniform/normal draws built on it.
#include "braid/core/generator.h"

#include <cmath>

namespace braid {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// 24 random bits mapped to the open interval (0, 1): never 0, so log() is safe.
inline float to_unit(uint32_t bits) {
  return (static_cast<float>(bits >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

std::array<uint32_t, 4> draw(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t key = seed ^ (stream * 0x9E3779B97F4A7C15ull);
  return philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                     static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                    {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
}

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, ctr[0], hi0, lo0);
    mulhilo(kMul1, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

uint64_t stable_hash(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

float uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return to_unit(draw(seed, stream, index)[0]);
}

float normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  const auto bits = draw(seed, stream, index);
  // Box-Muller on two independent uniforms of the same draw.
  const float u1 = to_unit(bits[0]), u2 = to_unit(bits[1]);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958647f * u2);
}

}  // namespace braid
