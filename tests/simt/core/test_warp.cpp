// Warp intrinsics under the emulator against references written from the CUDA programming
// guide's definitions: every shuffle kind at every width, votes, match and reduce, __syncwarp.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/test_kernels.h"
#include "support/simt_test_support.h"

namespace braid::simt::testing {
namespace {

// The guide's words: lanes are split into groups of `width`; __shfl_sync reads lane srcLane
// (mod width) of its own group; up/down read lane -/+ delta of the group and keep their own
// value when that leaves the group; xor reads lane ^ laneMask, keeping its own value when that
// lane lies in a later group.
int reference_source(ShuffleKind kind, int lane, int arg, int width) {
  const int group = lane / width * width, in_group = lane % width;
  switch (kind) {
    case ShuffleKind::idx:
      return group + (arg + 5 * lane) % width;
    case ShuffleKind::up:
      return in_group >= arg ? lane - arg : lane;
    case ShuffleKind::down:
      return in_group + arg < width ? lane + arg : lane;
    case ShuffleKind::bfly: {
      const int source = lane ^ arg;
      return source / width > lane / width ? lane : source;
    }
  }
  return lane;
}

TEST(SimtWarp, EveryShuffleKindAtEveryWidthMatchesTheGuide) {
  constexpr int kThreads = 64;
  std::vector<int> input(kThreads);
  for (int t = 0; t < kThreads; ++t) input[t] = 1000 + 7 * t;
  DeviceBuffer<int> in(input), out(kThreads);
  for (ShuffleKind kind :
       {ShuffleKind::idx, ShuffleKind::up, ShuffleKind::down, ShuffleKind::bfly}) {
    for (int width : {1, 2, 4, 8, 16, 32}) {
      for (int arg : {0, 1, 3, 8, 17, 31}) {
        out.fill(-1);
        run_shuffle(kind, in.get(), out.get(), arg, width, kThreads);
        const std::vector<int> got = out.download();
        for (int t = 0; t < kThreads; ++t) {
          const int warp_base = t / 32 * 32;
          const int expected = input[warp_base + reference_source(kind, t % 32, arg, width)];
          ASSERT_EQ(got[t], expected) << "kind " << static_cast<int>(kind) << " width " << width
                                      << " arg " << arg << " thread " << t;
        }
      }
    }
  }
}

TEST(SimtWarp, ShufflesMoveSixtyFourBitValues) {
  std::vector<double> input(32);
  for (int t = 0; t < 32; ++t) input[t] = 1.0 / (t + 1) + 1e-300 * t;
  DeviceBuffer<double> in(input), out(32);
  run_shuffle_double(in.get(), out.get(), 32);
  const std::vector<double> got = out.download();
  for (int t = 0; t < 32; ++t) EXPECT_EQ(got[t], input[t < 31 ? t + 1 : t]) << t;
}

TEST(SimtWarp, VotesOverFullAndPartialMasks) {
  std::vector<int> pred(32);
  for (int t = 0; t < 32; ++t) pred[t] = (t % 3 == 0) ? 5 : 0;
  DeviceBuffer<int> p(pred), any(32), all(32);
  DeviceBuffer<unsigned> ballot(32);
  for (unsigned mask : {0xffffffffu, 0x0000ffffu, 0x88888888u, 0x00000009u, 0x00000001u}) {
    ballot.fill(0xdeadbeefu);
    run_votes(p.get(), ballot.get(), any.get(), all.get(), mask);
    unsigned expected = 0;
    for (int t = 0; t < 32; ++t)
      if ((mask >> t & 1u) && pred[t] != 0) expected |= 1u << t;
    const std::vector<unsigned> b = ballot.download();
    const std::vector<int> a = any.download(), l = all.download();
    for (int t = 0; t < 32; ++t) {
      if (!(mask >> t & 1u)) {
        EXPECT_EQ(b[t], 0xdeadbeefu);  // not a participant: wrote nothing
        continue;
      }
      EXPECT_EQ(b[t], expected) << std::hex << mask;
      EXPECT_EQ(a[t], expected != 0 ? 1 : 0) << std::hex << mask;
      EXPECT_EQ(l[t], expected == mask ? 1 : 0) << std::hex << mask;
    }
  }
}

TEST(SimtWarp, MatchAnyAndWarpReductions) {
  constexpr int kThreads = 64;
  std::vector<unsigned> keys(kThreads);
  for (int t = 0; t < kThreads; ++t) keys[t] = static_cast<unsigned>((t * 7) % 5 + 100 * (t / 32));
  DeviceBuffer<unsigned> key(keys), match(kThreads), sum(kThreads), max(kThreads);
  run_match_reduce(key.get(), match.get(), sum.get(), max.get(), kThreads);
  const std::vector<unsigned> m = match.download(), s = sum.download(), x = max.download();
  for (int t = 0; t < kThreads; ++t) {
    const int base = t / 32 * 32;
    unsigned same = 0, total = 0, biggest = 0;
    for (int l = 0; l < 32; ++l) {
      if (keys[base + l] == keys[t]) same |= 1u << l;
      total += keys[base + l];
      biggest = std::max(biggest, keys[base + l]);
    }
    EXPECT_EQ(m[t], same) << t;
    EXPECT_EQ(s[t], total) << t;
    EXPECT_EQ(x[t], biggest) << t;
  }
}

TEST(SimtWarp, SyncwarpOrdersAWarpPrivateExchange) {
  constexpr int kThreads = 96;
  DeviceBuffer<int> out(kThreads);
  run_warp_exchange(out.get(), kThreads, /*syncwarp=*/true);
  const std::vector<int> got = out.download();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], (t / 32 * 32 + (t % 32 + 1) % 32) * 10);
}

}  // namespace
}  // namespace braid::simt::testing
