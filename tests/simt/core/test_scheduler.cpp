// The scheduler and the built-ins around it: atomics under contention across blocks, spin waits,
// block reductions, barrier votes, the seeded thread order, thread indices, dynamic shared
// memory, cp.async, launch configuration errors, exceptions and traps, deadlocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "kernels/test_kernels.h"
#include "simt/builtins_atomic.h"
#include "simt/emulated_device.h"
#include "simt/launch.h"
#include "support/simt_test_support.h"

namespace braid::simt::testing {
namespace {

TEST(SimtAtomics, EveryKindUnderContentionAcrossBlocks) {
  constexpr int kBlocks = 24, kThreads = 64, kTotal = kBlocks * kThreads;
  DeviceBuffer<int> add_int(std::vector<int>{0}), max_int(std::vector<int>{-5}),
      min_int(std::vector<int>{5});
  DeviceBuffer<unsigned> add_unsigned(std::vector<unsigned>{7}), inc(std::vector<unsigned>{0}),
      exch(std::vector<unsigned>{0xffffffffu});
  DeviceBuffer<unsigned long long> add_ull(std::vector<unsigned long long>{0});
  DeviceBuffer<float> add_float(std::vector<float>{0.0f}), cas_float(std::vector<float>{0.0f});
  DeviceBuffer<double> add_double(std::vector<double>{0.25});
  run_atomics({add_int.get(), add_unsigned.get(), add_ull.get(), add_float.get(), add_double.get(),
               max_int.get(), min_int.get(), inc.get(), exch.get(), cas_float.get()},
              kBlocks, kThreads);
  EXPECT_EQ(add_int.download()[0], 3 * kTotal);
  EXPECT_EQ(add_unsigned.download()[0], 7u + 2u * kTotal);
  EXPECT_EQ(add_ull.download()[0], (1ull << 33) * kTotal);
  EXPECT_EQ(add_float.download()[0], static_cast<float>(kTotal));  // exact: integers < 2^24
  EXPECT_EQ(add_double.download()[0], 0.25 + 0.5 * kTotal);
  EXPECT_EQ(max_int.download()[0], kTotal - 1);
  EXPECT_EQ(min_int.download()[0], -(kTotal - 1));
  EXPECT_EQ(inc.download()[0], static_cast<unsigned>(kTotal % 100));  // wraps after 99
  EXPECT_LT(exch.download()[0], static_cast<unsigned>(kTotal));       // some thread's index
  EXPECT_EQ(cas_float.download()[0], static_cast<float>(kTotal));
}

// The built-ins are the host's atomics: called from several OS threads at once (as launches on
// different devices run), no update is lost.
TEST(SimtAtomics, AtomicAcrossHostThreads) {
  constexpr int kThreads = 4, kEach = 200000;
  int add = 0, max = 0;
  float add_float = 0.0f;
  unsigned cas = 0;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // All start together, or the first could finish before the last begins.
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      for (int i = 0; i < kEach; ++i) {
        atomicAdd(&add, 1);
        atomicAdd(&add_float, 1.0f);
        atomicMax(&max, t * kEach + i);
        unsigned old = atomicCAS(&cas, 0u, 0u), assumed;
        do {
          assumed = old;
          old = atomicCAS(&cas, assumed, assumed + 1);
        } while (old != assumed);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(add, kThreads * kEach);
  EXPECT_EQ(add_float, static_cast<float>(kThreads * kEach));  // < 2^24: exact
  EXPECT_EQ(max, kThreads * kEach - 1);
  EXPECT_EQ(cas, static_cast<unsigned>(kThreads * kEach));
}

TEST(SimtAtomics, SpinWaitOnAnAtomicFlagMakesProgress) {
  DeviceBuffer<int> out(std::vector<int>{0});
  run_spin_wait(out.get());
  EXPECT_EQ(out.download()[0], 1);
}

TEST(SimtScheduler, DeviceReduceBlockSumIsExact) {
  constexpr int kBlocks = 5, kThreads = 256;
  std::vector<float> input(kBlocks * kThreads);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = static_cast<float>(static_cast<int>(i % 37) - 18);
  DeviceBuffer<float> in(input), out(kBlocks);
  run_block_sum(in.get(), out.get(), kBlocks, kThreads);
  const std::vector<float> got = out.download();
  for (int b = 0; b < kBlocks; ++b) {
    double expected = 0;  // small integers: every partial sum is exact in float
    for (int t = 0; t < kThreads; ++t) expected += input[b * kThreads + t];
    EXPECT_EQ(got[b], static_cast<float>(expected)) << b;
  }
}

TEST(SimtScheduler, BarrierCountAndAndOr) {
  constexpr int kThreads = 96;
  DeviceBuffer<int> out(3);
  run_barrier_votes(out.get(), kThreads);
  EXPECT_EQ(out.download(), (std::vector<int>{32, 1, 1}));
}

// The thread and block orders are drawn from the seed: the same seed repeats them, another
// changes them, and neither is the lockstep (index) order.
TEST(SimtScheduler, ThreadAndBlockOrderFollowTheSeed) {
  constexpr int kThreads = 64, kBlocks = 16;
  const uint64_t saved = seed();
  const auto orders_with = [&](uint64_t s) {
    set_seed(s);
    DeviceBuffer<int> order(kThreads), counter(std::vector<int>{0});
    run_arrival_order(order.get(), counter.get(), kThreads);
    DeviceBuffer<int> blocks(kBlocks), block_counter(std::vector<int>{0});
    run_block_order(blocks.get(), block_counter.get(), kBlocks);
    return std::make_pair(order.download(), blocks.download());
  };
  const auto a = orders_with(11), again = orders_with(11), b = orders_with(12);
  set_seed(saved);
  EXPECT_EQ(a, again);
  EXPECT_NE(a.first, b.first);
  EXPECT_NE(a.second, b.second);
  for (const std::vector<int>& order : {a.first, a.second}) {
    std::vector<int> sorted = order, in_order(order.size());
    std::sort(sorted.begin(), sorted.end());
    std::iota(in_order.begin(), in_order.end(), 0);
    EXPECT_EQ(sorted, in_order);  // every thread (block) once
    EXPECT_NE(order, in_order);   // not index order
  }
}

TEST(SimtScheduler, ThreeDimensionalBlocksAndLanes) {
  constexpr unsigned bx = 5, by = 3, bz = 4, gx = 2, gy = 3;
  constexpr unsigned per_block = bx * by * bz, total = per_block * gx * gy;
  DeviceBuffer<unsigned> out(4 * total);
  run_thread_indices(out.get(), bx, by, bz, gx, gy);
  const std::vector<unsigned> got = out.download();
  for (unsigned g = 0; g < total; ++g) {
    const unsigned t = g % per_block;
    EXPECT_EQ(got[4 * g + 0], t % bx);
    EXPECT_EQ(got[4 * g + 1], t / bx % by);
    EXPECT_EQ(got[4 * g + 2], t / (bx * by));
    EXPECT_EQ(got[4 * g + 3], t % 32);  // warps are consecutive linear thread indices
  }
}

TEST(SimtScheduler, DynamicSharedMemory) {
  constexpr int kThreads = 160;
  std::vector<float> input(kThreads);
  std::iota(input.begin(), input.end(), 1.0f);
  DeviceBuffer<float> in(input), out(kThreads);
  run_dynamic_shared(in.get(), out.get(), kThreads);
  const std::vector<float> got = out.download();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], input[kThreads - 1 - t]);
}

TEST(SimtScheduler, AsyncCopyWaitedThenRead) {
  constexpr int kThreads = 256;
  std::vector<float> input(kThreads);
  std::iota(input.begin(), input.end(), 0.5f);
  DeviceBuffer<float> in(input), out(kThreads);
  run_async_copy(in.get(), out.get(), kThreads);
  const std::vector<float> got = out.download();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], 2.0f * input[t]);
}

TEST(SimtScheduler, BadConfigurationIsALaunchErrorAndRunsNothing) {
  DeviceBuffer<int> out(std::vector<int>(2048, 0));
  run_oversized_block(out.get());
  EXPECT_NE(last_launch_error_detail().find("2048 threads per block"), std::string::npos)
      << last_launch_error_detail();
  const std::vector<int> got = out.download();
  EXPECT_EQ(std::count(got.begin(), got.end(), 1), 0);
}

TEST(SimtScheduler, ExceptionsAndTrapsInKernelsAreFaults) {
  DeviceBuffer<int> out(8);
  const std::string thrown = fault_of([&] { run_throwing_kernel(out.get()); });
  EXPECT_FAULT(thrown, "simt: exception", "throwing_kernel");
  EXPECT_NE(thrown.find("thread (3, 0, 0) threw: kernel-side failure"), std::string::npos)
      << thrown;
  const std::string trapped = fault_of([&] { run_trapping_kernel(out.get()); });
  EXPECT_FAULT(trapped, "simt: trap", "trapping_kernel");
  EXPECT_NE(trapped.find("thread (3, 0, 0) executed __trap()"), std::string::npos) << trapped;
}

TEST(SimtScheduler, CollectivesWaitingInACycleAreADeadlock) {
  const std::string message = fault_of([] { run_collective_cycle(); });
  EXPECT_FAULT(message, "simt: deadlock", "collective_cycle_kernel");
  EXPECT_NE(message.find("lane 0 of warp 0 waits at __shfl_sync"), std::string::npos) << message;
  EXPECT_NE(message.find("with mask 0x00000003 for lane 1"), std::string::npos) << message;
}

// A fault leaves the emulator ready for the next launch.
TEST(SimtScheduler, LaunchesRunAfterAFault) {
  DeviceBuffer<int> out(8);
  EXPECT_FALSE(fault_of([&] { run_throwing_kernel(out.get()); }).empty());
  DeviceBuffer<float> in(std::vector<float>(160, 1.0f)), copy(160);
  run_dynamic_shared(in.get(), copy.get(), 160);
  EXPECT_EQ(copy.download(), std::vector<float>(160, 1.0f));
}

}  // namespace
}  // namespace braid::simt::testing
