// The emulated device memory: allocation (alignment, poison, gaps, quarantine, reuse, capacity),
// the initialisation shadow, and the guard that makes host touches of device memory fault.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "runtime_test_util.h"
#include "simt/device_memory.h"

namespace braid::simt {
namespace {

using testing::DeviceBuffer;
using testing::died_of_segv;
using testing::kSegvReport;

class DeviceMemoryTest : public testing::RuntimeTest {};

// Reads a device byte the way the runtime and kernels may: inside a DeviceAccess.
unsigned char peek(const void* p) {
  DeviceAccess access;
  return *static_cast<const volatile unsigned char*>(p);
}

TEST_F(DeviceMemoryTest, AllocationsAre256ByteAlignedAndFound) {
  std::vector<void*> ptrs;
  for (size_t bytes : {1, 3, 255, 256, 257, 4096, 100000}) {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    EXPECT_TRUE(in_device_arena(p));
    const Allocation* a = find_allocation(p, bytes);
    ASSERT_NE(a, nullptr) << bytes;
    EXPECT_EQ(a->base, p);
    EXPECT_EQ(a->bytes, bytes);
    // The last byte is inside; one past it, and a range running over the end, are not.
    EXPECT_EQ(find_allocation(static_cast<char*>(p) + bytes - 1), a);
    EXPECT_EQ(find_allocation(static_cast<char*>(p) + bytes), nullptr);
    EXPECT_EQ(find_allocation(p, bytes + 1), nullptr);
    ptrs.push_back(p);
  }
  for (void* p : ptrs) EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(DeviceMemoryTest, AnOverrunOfUpToTheAllocationsSizeHitsNoOtherAllocation) {
  // Consecutive allocations are separated by a gap as large as each (256 B .. 2 MiB).
  DeviceBuffer a(1000), b(1000), c(64 << 10);
  for (const DeviceBuffer* buffer : {&a, &b, &c}) {
    const Allocation* own = find_allocation(buffer->get());
    ASSERT_NE(own, nullptr);
    for (size_t past = 0; past < own->bytes; past += 4)
      ASSERT_EQ(find_allocation(buffer->get<char>() + own->bytes + past), nullptr) << past;
  }
}

TEST_F(DeviceMemoryTest, NewAllocationsArePoisonedAndUninitialised) {
  DeviceBuffer buffer(1024);
  EXPECT_EQ(first_uninitialized(buffer.get(), 1024), buffer.get());
  const std::vector<float> host = testing::download<float>(buffer.get(), 256);
  for (float v : host) EXPECT_TRUE(std::isnan(v));  // 0xffffffff
  EXPECT_EQ(peek(buffer.get<char>() + 1023), 0xff);
}

TEST_F(DeviceMemoryTest, FreedMemoryIsQuarantinedThenReused) {
  void* first = nullptr;
  ASSERT_EQ(cudaMalloc(&first, 4096), cudaSuccess);
  ASSERT_EQ(cudaFree(first), cudaSuccess);
  EXPECT_EQ(find_allocation(first), nullptr);  // a use after free is a fault, not a new tensor
  void* second = nullptr;
  ASSERT_EQ(cudaMalloc(&second, 4096), cudaSuccess);
  EXPECT_NE(second, first);
  ASSERT_EQ(cudaFree(second), cudaSuccess);
  EXPECT_EQ(cudaFree(second), cudaErrorInvalidValue);  // a double free
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

// A small device: allocating past its capacity fails, and freeing makes the memory usable again.
TEST_F(DeviceMemoryTest, CapacityExhaustionAndReuse) {
  const size_t normal = device_memory_capacity();
  constexpr size_t kCapacity = 8 << 20;
  set_device_memory_capacity(kCapacity);
  std::vector<void*> earlier;
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> ptrs;
    void* p = nullptr;
    while (cudaMalloc(&p, 1 << 20) == cudaSuccess) ptrs.push_back(p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT_EQ(ptrs.size(), kCapacity / (1 << 20)) << "round " << round;
    EXPECT_EQ(device_memory_in_use(), kCapacity);
    // The addresses come back too (a small device quarantines little): by the last round, blocks
    // freed in the earlier ones are handed out again.
    int reused = 0;
    for (void* q : ptrs) reused += std::count(earlier.begin(), earlier.end(), q);
    if (round == 2) EXPECT_GT(reused, 0);
    earlier.insert(earlier.end(), ptrs.begin(), ptrs.end());
    for (void* q : ptrs) ASSERT_EQ(cudaFree(q), cudaSuccess);
    EXPECT_EQ(device_memory_in_use(), 0u);
  }
  set_device_memory_capacity(normal);
}

TEST_F(DeviceMemoryTest, MallocBeyondTheDeviceFailsCleanly) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMalloc(&p, emulated_device_model().global_memory + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(&p, SIZE_MAX), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMalloc(&p, 0), cudaSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  int host = 0;
  EXPECT_EQ(cudaFree(&host), cudaErrorInvalidValue);
}

TEST_F(DeviceMemoryTest, MemGetInfoFollowsAllocations) {
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_EQ(total, emulated_device_model().global_memory);
  {
    DeviceBuffer buffer(1000);
    size_t free1 = 0;
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_EQ(free0 - free1, 1024u);  // counted in cudaMalloc's 256-byte units
  }
  size_t free2 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  EXPECT_EQ(free2, free0);
  EXPECT_EQ(cudaMemGetInfo(nullptr, &total), cudaErrorInvalidValue);
}

TEST_F(DeviceMemoryTest, ShadowMarksAndCopiesBitByBit) {
  DeviceBuffer a(300), b(300);
  char* pa = a.get<char>();
  char* pb = b.get<char>();
  mark_initialized(pa + 3, 70);  // crosses a 64-byte shadow word
  EXPECT_EQ(first_uninitialized(pa, 300), pa);
  EXPECT_EQ(first_uninitialized(pa + 3, 70), nullptr);
  EXPECT_EQ(first_uninitialized(pa + 3, 71), pa + 73);
  EXPECT_EQ(first_uninitialized(pa + 2, 5), pa + 2);
  // Copying carries exactly those bits, at another offset.
  copy_initialization(pb + 10, pa, 100);
  EXPECT_EQ(first_uninitialized(pb + 13, 70), nullptr);
  EXPECT_EQ(first_uninitialized(pb + 10, 100), pb + 10);
  EXPECT_EQ(first_uninitialized(pb + 13, 71), pb + 83);
  // A host source counts as written; host memory is never "uninitialised".
  const std::vector<char> host(50);
  copy_initialization(pb + 200, host.data(), 50);
  EXPECT_EQ(first_uninitialized(pb + 200, 50), nullptr);
  EXPECT_EQ(first_uninitialized(host.data(), 50), nullptr);
}

TEST_F(DeviceMemoryTest, OverlappingShadowCopyActsAsMemmove) {
  DeviceBuffer a(512);
  char* p = a.get<char>();
  mark_initialized(p, 100);             // bytes 0..99 written, 100.. not
  copy_initialization(p + 50, p, 200);  // dst overlaps src's tail: must read before writing
  EXPECT_EQ(first_uninitialized(p + 50, 100), nullptr);
  EXPECT_EQ(first_uninitialized(p + 50, 101), p + 150);
}

TEST_F(DeviceMemoryTest, AHostReadOfDeviceMemoryDies) {
  DeviceBuffer buffer(64);
  const volatile char* p = buffer.get<char>();
  EXPECT_EQ(peek(buffer.get()), 0xff);  // through a DeviceAccess: fine
  EXPECT_EXIT({ (void)*p; }, died_of_segv, kSegvReport);
}

TEST_F(DeviceMemoryTest, AHostWriteOfDeviceMemoryDies) {
  DeviceBuffer buffer(64);
  volatile char* p = buffer.get<char>();
  EXPECT_EXIT({ *p = 1; }, died_of_segv, kSegvReport);
}

// The guard counts holders across threads: memory stays open until the last one ends.
TEST_F(DeviceMemoryTest, AccessIsCountedAcrossThreads) {
  DeviceBuffer buffer(64);
  const volatile char* p = buffer.get<char>();
  EXPECT_EXIT(
      {
        auto outer = std::make_unique<DeviceAccess>();
        std::thread other([&] {
          DeviceAccess inner;  // ends first: the arena must stay open for `outer`
        });
        other.join();
        (void)*p;  // still open
        { DeviceAccess nested; }
        (void)*p;
        outer.reset();
        std::fprintf(stderr, "closed\n");
        (void)*p;  // closed now
      },
      died_of_segv, "closed");
}

// Threads allocating, copying, looking up and freeing at once (the allocator's locks, the
// lookup cache's generations, the guard's count) each see exactly their own data.
TEST_F(DeviceMemoryTest, ConcurrentAllocationsCopiesAndLookups) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 100; ++i) {
        const size_t bytes = 1 + static_cast<size_t>((t * 7919 + i * 104729) % 20000);
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
          ++failures;
          continue;
        }
        std::vector<unsigned char> host(bytes, static_cast<unsigned char>(t * 31 + i));
        std::vector<unsigned char> back(bytes);
        const Allocation* a = find_allocation(p, bytes);
        if (a == nullptr || a->base != p || a->bytes != bytes) ++failures;
        if (cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemcpy(back.data(), p, bytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
            back != host || first_uninitialized(p, bytes) != nullptr)
          ++failures;
        if (cudaFree(p) != cudaSuccess || find_allocation(p) != nullptr) ++failures;
      }
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(device_memory_in_use(), 0u);
}

}  // namespace
}  // namespace braid::simt
