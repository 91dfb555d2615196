// Counter-based random numbers (Philox-4x32-10): a value is a pure function of key and counter.
//
// Nothing is sequential, so any shard of a tensor can generate exactly its slice of the
// values a single process would generate, and sampling is reproducible from (seed, step).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace braid {

// Philox-4x32 with 10 rounds (Salmon et al., SC'11): 128-bit counter, 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A stable 64-bit hash of a string (FNV-1a), used to key streams by parameter name.
uint64_t stable_hash(std::string_view text);

// Uniform in (0, 1) and standard normal draws for stream (seed, stream) at position index.
float uniform_at(uint64_t seed, uint64_t stream, uint64_t index);
float normal_at(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace braid
