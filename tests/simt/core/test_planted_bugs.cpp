// Planted bugs: each kernel under tests/simt/kernels/bug_*.cu breaks one CUDA rule and must be
// caught, under several thread orders, with a message naming the kernel; its correct twin must
// pass and compute the right result (so the checks do not simply always fire).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/test_kernels.h"
#include "simt/launch.h"
#include "support/simt_test_support.h"

namespace braid::simt::testing {
namespace {

// Runs `body` under a few seeds: a check that depends on the thread order would show.
template <class Body>
void under_seeds(Body body) {
  const uint64_t saved = seed();
  for (uint64_t s : {1u, 2u, 977u}) {
    set_seed(s);
    SCOPED_TRACE("seed " + std::to_string(s));
    body();
  }
  set_seed(saved);
}

std::vector<float> iota_floats(int n, float start = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(SimtPlantedBugs, ReductionWithoutItsFirstBarrierRaces) {
  DeviceBuffer<float> in(iota_floats(128)), out(2);
  under_seeds([&] {
    const std::string m =
        fault_of([&] { run_reduce_without_first_barrier(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: data race on shared memory", "reduce_twice_kernel<false, true>");
    EXPECT_NE(m.find("`partials` (float[32], 128 bytes)"), std::string::npos) << m;
    EXPECT_NE(m.find("reduce_variants.cuh:"), std::string::npos) << m;  // the access sites
  });
}

TEST(SimtPlantedBugs, ReductionWithoutItsSecondBarrierRaces) {
  DeviceBuffer<float> in(iota_floats(128)), out(2);
  under_seeds([&] {
    const std::string m =
        fault_of([&] { run_reduce_without_second_barrier(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: data race on shared memory", "reduce_twice_kernel<true, false>");
    EXPECT_NE(m.find("`partials`"), std::string::npos) << m;
  });
}

TEST(SimtPlantedBugs, ReductionWithBothBarriersIsCorrect) {
  DeviceBuffer<float> in(iota_floats(128)), out(2);
  under_seeds([&] {
    EXPECT_EQ(fault_of([&] { run_reduce_without_first_barrier(in.get(), out.get(), false); }), "");
    EXPECT_EQ(out.download(), (std::vector<float>{8256.0f, 16512.0f}));
    EXPECT_EQ(fault_of([&] { run_reduce_without_second_barrier(in.get(), out.get(), false); }), "");
    EXPECT_EQ(out.download(), (std::vector<float>{8256.0f, 16512.0f}));
  });
}

TEST(SimtPlantedBugs, BarrierSomeThreadsLeaveBefore) {
  DeviceBuffer<int> out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_barrier_exit(out.get(), true); });
    EXPECT_FAULT(m, "simt: barrier not reached by every thread", "barrier_exit_kernel");
    // Every waiting thread and every exited one, wherever the thread order put the first exit.
    EXPECT_NE(m.find("32 threads ((0, 0, 0)..(31, 0, 0)) wait at __syncthreads ("),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("bug_barrier_exit.cu:15), but 32 threads ((32, 0, 0)..(63, 0, 0)) exited "
                     "without reaching it"),
              std::string::npos)
        << m;
    EXPECT_EQ(fault_of([&] { run_barrier_exit(out.get(), false); }), "");
    const std::vector<int> got = out.download();
    for (int t = 0; t < 64; ++t) ASSERT_EQ(got[t], 63 - t);
  });
}

TEST(SimtPlantedBugs, BarriersAtTwoCallSites) {
  DeviceBuffer<int> out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_barrier_two_sites(out.get(), true); });
    EXPECT_FAULT(m, "simt: barrier divergence", "barrier_two_sites_kernel");
    EXPECT_NE(m.find("32 threads ((0, 0, 0), (2, 0, 0), (4, 0, 0), (6, 0, 0)"), std::string::npos)
        << m;
    EXPECT_NE(m.find("every thread of the block must reach the same barrier"), std::string::npos)
        << m;
    EXPECT_EQ(fault_of([&] { run_barrier_two_sites(out.get(), false); }), "");
  });
}

TEST(SimtPlantedBugs, TileBoundOffByOneIsOutOfBounds) {
  constexpr int n = 100;  // not a multiple of the 32-thread tile
  DeviceBuffer<float> in(iota_floats(n)), out(n);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_tile_bound(in.get(), out.get(), n, true); });
    EXPECT_FAULT(m, "simt: out-of-bounds global memory access", "tile_copy_kernel");
    EXPECT_NE(m.find("reads 4 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("right after the end of allocation"), std::string::npos) << m;
    EXPECT_NE(m.find("(400 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("bug_tile_bound.cu:"), std::string::npos) << m;
    EXPECT_EQ(fault_of([&] { run_tile_bound(in.get(), out.get(), n, false); }), "");
    const std::vector<float> got = out.download();
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], i + 2.0f);
  });
}

TEST(SimtPlantedBugs, ShuffleMaskMissingACallingLane) {
  DeviceBuffer<int> in(std::vector<int>(32, 1)), out(32);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_mask_missing_lane(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: warp collective mask error", "mask_missing_lane_kernel");
    EXPECT_NE(m.find("lane 31"), std::string::npos) << m;
    EXPECT_EQ(fault_of([&] { run_mask_missing_lane(in.get(), out.get(), false); }), "");
    EXPECT_EQ(out.download(), std::vector<int>(32, 32));
  });
}

TEST(SimtPlantedBugs, ShuffleMaskNamingExitedLanes) {
  DeviceBuffer<int> in(std::vector<int>(32, 2)), out(std::vector<int>(32, 0));
  under_seeds([&] {
    const std::string m = fault_of([&] { run_mask_exited_lane(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: warp collective names an exited lane", "mask_exited_lane_kernel");
    EXPECT_NE(m.find("lanes 0-15 of warp 0 wait at __shfl_xor_sync ("), std::string::npos) << m;
    EXPECT_NE(m.find("with mask 0xffffffff for lanes 16-31, of which lanes 16-31 exited"),
              std::string::npos)
        << m;
    EXPECT_EQ(fault_of([&] { run_mask_exited_lane(in.get(), out.get(), false); }), "");
    const std::vector<int> got = out.download();
    for (int l = 0; l < 16; ++l) ASSERT_EQ(got[l], 32);
  });
}

TEST(SimtPlantedBugs, ShuffleReadingALaneOutsideTheMask) {
  std::vector<int> values(32);
  std::iota(values.begin(), values.end(), 100);
  DeviceBuffer<int> in(values), out(32);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_mask_source_outside(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: warp collective mask error", "mask_source_outside_kernel");
    EXPECT_NE(m.find("which is not in mask 0x0000ffff"), std::string::npos) << m;
    EXPECT_EQ(fault_of([&] { run_mask_source_outside(in.get(), out.get(), false); }), "");
    const std::vector<int> got = out.download();
    for (int l = 0; l < 16; ++l) ASSERT_EQ(got[l], 100 + (l + 8) % 16);
  });
}

TEST(SimtPlantedBugs, SharedArrayOneElementShort) {
  DeviceBuffer<float> in(iota_floats(64)), out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_shared_short(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: out-of-bounds shared memory access", "shared_tile_kernel<kThreads - 1>");
    EXPECT_NE(m.find("right after the end of `tile` (float[kTileSize], 252 bytes)"),
              std::string::npos)
        << m;
    EXPECT_EQ(fault_of([&] { run_shared_short(in.get(), out.get(), false); }), "");
    const std::vector<float> got = out.download();
    for (int t = 0; t < 64; ++t) ASSERT_EQ(got[t], 64.0f - t);
  });
}

TEST(SimtPlantedBugs, UnsynchronisedSharedWriteAndRead) {
  DeviceBuffer<float> in(iota_floats(64)), out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_shared_race(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: data race on shared memory", "shared_race_kernel");
    EXPECT_NE(m.find("`s` (float[kThreads], 256 bytes)"), std::string::npos) << m;
    EXPECT_EQ(fault_of([&] { run_shared_race(in.get(), out.get(), false); }), "");
    const std::vector<float> got = out.download();
    for (int t = 0; t < 64; ++t) ASSERT_EQ(got[t], static_cast<float>((t + 1) % 64 + 1));
  });
}

TEST(SimtPlantedBugs, WarpExchangeWithoutSyncwarp) {
  DeviceBuffer<int> out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_warp_race(out.get(), true); });
    EXPECT_FAULT(m, "simt: data race on shared memory", "warp_race_kernel");
    EXPECT_EQ(fault_of([&] { run_warp_race(out.get(), false); }), "");
    const std::vector<int> got = out.download();
    for (int t = 0; t < 64; ++t) ASSERT_EQ(got[t], t / 32 * 32 + 31 - t % 32);
  });
}

// Each hazard direction on its own: the meeting fixes which access comes first in time.
TEST(SimtPlantedBugs, ShuffleIsNoMemoryFence) {
  DeviceBuffer<int> out(1);
  under_seeds([&] {
    const std::string raw = fault_of([&] { run_shuffle_not_fence(out.get(), 0); });
    EXPECT_FAULT(raw, "simt: data race on shared memory", "shuffle_not_fence_kernel");
    EXPECT_NE(raw.find("thread (1, 0, 0) reads 4 bytes at byte 0 of `slot`"), std::string::npos)
        << raw;
    EXPECT_NE(raw.find("(read after write)"), std::string::npos) << raw;
    const std::string war = fault_of([&] { run_shuffle_not_fence(out.get(), 1); });
    EXPECT_FAULT(war, "simt: data race on shared memory", "shuffle_not_fence_kernel");
    EXPECT_NE(war.find("thread (0, 0, 0) writes 4 bytes at byte 0 of `slot`"), std::string::npos)
        << war;
    EXPECT_NE(war.find("(write after read)"), std::string::npos) << war;
    EXPECT_EQ(fault_of([&] { run_shuffle_not_fence(out.get(), 2); }), "");
    EXPECT_EQ(out.download()[0], 100);
  });
}

TEST(SimtPlantedBugs, GlobalWriteRaceBetweenBlocks) {
  DeviceBuffer<int> out(std::vector<int>{0});
  under_seeds([&] {
    const std::string m = fault_of([&] { run_global_race(out.get(), 8, true); });
    EXPECT_FAULT(m, "simt: data race on global memory", "global_race_kernel");
    EXPECT_NE(m.find("wrote byte 0 earlier in this launch (write after write)"), std::string::npos)
        << m;
    out.fill(0);
    EXPECT_EQ(fault_of([&] { run_global_race(out.get(), 8, false); }), "");
    EXPECT_EQ(out.download()[0], 8);
  });
}

TEST(SimtPlantedBugs, BlockReadingWhatAnotherBlockWrites) {
  DeviceBuffer<int> data(std::vector<int>(6, 10));
  under_seeds([&] {
    data.fill(10);
    const std::string m = fault_of([&] { run_global_read_race(data.get(), 6, true); });
    EXPECT_FAULT(m, "simt: data race on global memory", "global_read_race_kernel");
    data.fill(10);
    EXPECT_EQ(fault_of([&] { run_global_read_race(data.get(), 6, false); }), "");
    EXPECT_EQ(data.download(), std::vector<int>(6, 11));
  });
}

TEST(SimtPlantedBugs, ReadOfDeviceMemoryNeverWritten) {
  constexpr int n = 70;
  DeviceBuffer<float> in(n), out(n);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_read_buffer(in.get(), out.get(), n); });
    EXPECT_FAULT(m, "simt: uninitialised global memory read", "read_buffer_kernel");
    EXPECT_NE(m.find("was never written"), std::string::npos) << m;
  });
  in.upload(iota_floats(n));
  under_seeds([&] {
    EXPECT_EQ(fault_of([&] { run_read_buffer(in.get(), out.get(), n); }), "");
    EXPECT_EQ(out.download()[n - 1], 2.0f * n);
  });
}

TEST(SimtPlantedBugs, ReadOfSharedMemoryNeverWritten) {
  DeviceBuffer<float> out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_uninit_shared(out.get(), true); });
    EXPECT_FAULT(m, "simt: uninitialised shared memory read", "uninit_shared_kernel");
    EXPECT_NE(m.find("of `s`"), std::string::npos) << m;
    EXPECT_EQ(fault_of([&] { run_uninit_shared(out.get(), false); }), "");
  });
}

TEST(SimtPlantedBugs, AsyncCopyReadBeforeItsWait) {
  DeviceBuffer<float> in(iota_floats(128)), out(128);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_async_missing_wait(in.get(), out.get(), true); });
    EXPECT_FAULT(m, "simt: cp.async hazard", "async_missing_wait_kernel");
    EXPECT_NE(m.find("is still in flight"), std::string::npos) << m;
    EXPECT_EQ(fault_of([&] { run_async_missing_wait(in.get(), out.get(), false); }), "");
    const std::vector<float> got = out.download();
    for (int t = 0; t < 128; ++t) ASSERT_EQ(got[t], static_cast<float>((t + 4) % 128 + 1));
  });
}

// A float4 load is four 4-byte accesses to the checker; UBSan's alignment check sees the vector
// type and the emulator turns its report into a fault. UBSan reports a source line once per
// process, so this runs under one seed only.
TEST(SimtPlantedBugs, MisalignedVectorLoad) {
  DeviceBuffer<float> in(iota_floats(40)), out(8);
  const std::string m = fault_of([&] { run_misaligned_vector(in.get(), out.get(), true); });
  EXPECT_FAULT(m, "simt: undefined behaviour", "misaligned_vector_kernel");
  EXPECT_NE(m.find("misaligned address"), std::string::npos) << m;
  under_seeds([&] {
    EXPECT_EQ(fault_of([&] { run_misaligned_vector(in.get(), out.get(), false); }), "");
    EXPECT_EQ(out.download()[1], 5.0f + 6.0f + 7.0f + 8.0f);
  });
}

TEST(SimtPlantedBugs, DynamicSharedMemoryOverrun) {
  DeviceBuffer<float> out(64);
  under_seeds([&] {
    const std::string m = fault_of([&] { run_dynamic_overflow(out.get(), true); });
    EXPECT_FAULT(m, "simt: out-of-bounds shared memory access", "dynamic_overflow_kernel");
    EXPECT_NE(m.find("right after the end of `dynamic` (dynamic, 256 bytes)"), std::string::npos)
        << m;
    EXPECT_EQ(fault_of([&] { run_dynamic_overflow(out.get(), false); }), "");
  });
}

}  // namespace
}  // namespace braid::simt::testing
