// The caching device allocator (kernels/caching_allocator.h): its logic against a stand-in
// device that decides when events complete and how much memory there is (runs everywhere), and
// the allocator behind cuda Storage on a device or the SIMT emulator: reuse, no cudaMalloc in
// repeated steps, statistics through core, out-of-memory messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "braid/core/allocator.h"
#include "braid/core/byte_count.h"
#include "braid/core/stream.h"
#include "braid/core/tensor.h"
#include "support/test_util.h"

#ifdef BRAID_WITH_CUDA
#include "caching_allocator.h"
#include "cuda_runtime.cuh"
#include "elementwise/gelu.cuh"
#include "elementwise/sum.cuh"
#include "gemm/gemm.cuh"
#include "norm/layer_norm.cuh"
#include "norm/softmax.cuh"
#endif
#ifdef BRAID_SIMT
#include "simt/emulated_device.h"
#endif

#ifndef BRAID_WITH_CUDA

TEST(CachingAllocator, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA";
}

#else

namespace braid {
namespace {

using cuda::CachingAllocator;
using cuda::rounded_block_size;

constexpr size_t kMiB = size_t{1} << 20;

cudaStream_t fake_stream(uintptr_t id) {
  return reinterpret_cast<cudaStream_t>(id);
}
const cudaStream_t kCompute = fake_stream(0x100);
const cudaStream_t kCopy = fake_stream(0x200);

// A stand-in device: addresses that are never dereferenced, a capacity, and events that stay
// incomplete while their stream is marked busy. Not thread-safe itself: the allocator calls it
// only under its own lock.
class FakeDevice final : public cuda::AllocatorBackend {
 public:
  size_t capacity = size_t{1} << 30;
  size_t used = 0;
  std::map<void*, size_t> live;  // segments: pointer -> bytes
  int mallocs = 0, failed_mallocs = 0, frees = 0, synchronizes = 0;
  std::set<cudaStream_t> busy;

  cudaError_t malloc(int, size_t bytes, void** ptr) override {
    if (used + bytes > capacity) {
      ++failed_mallocs;
      return cudaErrorMemoryAllocation;
    }
    // Segments 4 KiB apart, so no two are adjacent (a merge across them would show).
    *ptr = reinterpret_cast<void*>(next_address_);
    next_address_ += (bytes + 8191) / 4096 * 4096;
    used += bytes;
    live[*ptr] = bytes;
    ++mallocs;
    return cudaSuccess;
  }
  void free(int, void* ptr) override {
    auto it = live.find(ptr);
    ASSERT_NE(it, live.end()) << "cudaFree of a pointer that is not a segment";
    used -= it->second;
    live.erase(it);
    ++frees;
  }
  cudaEvent_t create_event(int) override {
    auto event = reinterpret_cast<cudaEvent_t>(++next_event_);
    events_[event] = {};
    return event;
  }
  void destroy_event(int, cudaEvent_t event) override { events_.erase(event); }
  bool record(int, cudaEvent_t event, cudaStream_t stream) override {
    events_.at(event) = {stream, busy.count(stream) == 0};
    return true;
  }
  bool ready(int, cudaEvent_t event) override { return events_.at(event).complete; }
  void synchronize(int, cudaEvent_t event) override {
    ++synchronizes;
    events_.at(event).complete = true;
  }
  void memory_info(int, size_t* free, size_t* total) override {
    *total = capacity;
    *free = capacity - used;
  }
  // The work issued on `stream` so far has finished.
  void finish(cudaStream_t stream) {
    busy.erase(stream);
    for (auto& [event, state] : events_)
      if (state.stream == stream) state.complete = true;
  }

 private:
  struct EventState {
    cudaStream_t stream = nullptr;
    bool complete = true;
  };
  uintptr_t next_address_ = uintptr_t{1} << 40;
  uintptr_t next_event_ = 0x10;
  std::map<cudaEvent_t, EventState> events_;
};

// ========================= allocator logic (no device needed) ================================

TEST(CachingAllocator, RoundsToSizeClassesAndSegments) {
  EXPECT_EQ(rounded_block_size(1), 512u);
  EXPECT_EQ(rounded_block_size(512), 512u);
  EXPECT_EQ(rounded_block_size(513), 1024u);
  EXPECT_EQ(rounded_block_size(kMiB), kMiB);
  FakeDevice device;
  CachingAllocator allocator(0, device);
  void* small = allocator.allocate(100, kCompute);
  EXPECT_EQ(device.live.at(small), 2 * kMiB);  // small requests share 2 MiB segments
  void* large = allocator.allocate(kMiB + 1, kCompute);
  EXPECT_EQ(device.live.at(large), 2 * kMiB);  // large: its own segment, 2 MiB multiples
  void* larger = allocator.allocate(5 * kMiB, kCompute);
  EXPECT_EQ(device.live.at(larger), 6 * kMiB);
  const DeviceMemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(512 + (kMiB + 512) + 5 * kMiB));
  EXPECT_EQ(s.requested_bytes, static_cast<int64_t>(100 + kMiB + 1 + 5 * kMiB));
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(10 * kMiB));
  EXPECT_EQ(s.segments, 3);
  EXPECT_EQ(s.device_mallocs, 3);
  for (void* p : {small, large, larger}) allocator.release(p);
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<int64_t>(10 * kMiB));  // cached
}

TEST(CachingAllocator, ReusesAFreedBlockOfTheSameSizeClass) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  void* a = allocator.allocate(4 * kMiB, kCompute);
  allocator.release(a);
  EXPECT_EQ(allocator.allocate(4 * kMiB - 100, kCompute), a);  // same rounded class
  void* s = allocator.allocate(1000, kCompute);
  allocator.release(s);
  EXPECT_EQ(allocator.allocate(900, kCompute), s);
  EXPECT_EQ(device.mallocs, 2);
  EXPECT_EQ(allocator.stats().device_mallocs, 2);
  EXPECT_EQ(device.frees, 0);
}

TEST(CachingAllocator, SplitsSegmentsAndMergesFreedNeighbours) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  char* x = static_cast<char*>(allocator.allocate(1000, kCompute));
  char* y = static_cast<char*>(allocator.allocate(3000, kCompute));
  char* z = static_cast<char*>(allocator.allocate(512, kCompute));
  EXPECT_EQ(y, x + 1024);  // carved one after another from the first small segment
  EXPECT_EQ(z, y + 3072);
  // Freed in an order that needs both merges (with the block before and the one after).
  allocator.release(x);
  allocator.release(z);
  allocator.release(y);
  // The segment is whole again: a 1 MiB request fits at its start, and another one after it.
  EXPECT_EQ(allocator.allocate(kMiB, kCompute), x);
  EXPECT_EQ(allocator.allocate(kMiB, kCompute), x + kMiB);
  EXPECT_EQ(device.mallocs, 1);
  // A large block's rest is split off too (allocated stays exact), but a rest below the large
  // class serves neither a small request nor a large one.
  char* big = static_cast<char*>(allocator.allocate(6 * kMiB, kCompute));
  allocator.release(big);
  EXPECT_EQ(allocator.allocate(5 * kMiB + 512, kCompute), big);
  EXPECT_EQ(allocator.stats().allocated_bytes, static_cast<int64_t>(2 * kMiB + 5 * kMiB + 512));
  char* tiny = static_cast<char*>(allocator.allocate(1000, kCompute));
  EXPECT_FALSE(tiny >= big && tiny < big + 6 * kMiB);
  void* next_large = allocator.allocate(kMiB + 512, kCompute);
  EXPECT_EQ(device.live.count(next_large), 1u);  // a segment of its own
  EXPECT_EQ(device.mallocs, 4);
}

TEST(CachingAllocator, PoolsArePerStream) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  void* a = allocator.allocate(4 * kMiB, kCompute);
  allocator.release(a);
  // The copy stream may still be behind the compute stream: it never gets the compute
  // stream's freed block (that would need an event), it gets its own segment.
  void* b = allocator.allocate(4 * kMiB, kCopy);
  EXPECT_NE(b, a);
  EXPECT_EQ(allocator.allocate(4 * kMiB, kCompute), a);
  EXPECT_EQ(device.mallocs, 2);
}

TEST(CachingAllocator, ABlockUsedOnAnotherStreamWaitsForItsEvent) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  void* a = allocator.allocate(4 * kMiB, kCompute);
  allocator.record_stream(a, kCopy);
  device.busy.insert(kCopy);  // the copy stream still works on `a`
  allocator.release(a);
  void* b = allocator.allocate(4 * kMiB, kCompute);
  EXPECT_NE(b, a) << "handed out while the copy stream may still use it";
  EXPECT_EQ(device.mallocs, 2);
  device.finish(kCopy);
  EXPECT_EQ(allocator.allocate(4 * kMiB, kCompute), a);  // back in the compute pool now
  EXPECT_EQ(device.mallocs, 2);
  // Recording the allocation stream itself asks for no event: stream order suffices.
  allocator.record_stream(b, kCompute);
  device.busy.insert(kCompute);
  allocator.release(b);
  EXPECT_EQ(allocator.allocate(4 * kMiB, kCompute), b);
}

TEST(CachingAllocator, EmptyCacheWaitsForEventsAndGivesFreeSegmentsBack) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  void* kept = allocator.allocate(3000, kCompute);
  void* waiting = allocator.allocate(8 * kMiB, kCompute);
  void* cached = allocator.allocate(2 * kMiB, kCopy);
  allocator.record_stream(waiting, kCopy);
  device.busy.insert(kCopy);
  allocator.release(waiting);
  allocator.release(cached);
  allocator.empty_cache();
  EXPECT_EQ(device.synchronizes, 1);  // the pending release was waited for, then freed
  EXPECT_EQ(device.frees, 2);
  ASSERT_EQ(device.live.size(), 1u);  // the segment of the block still in use stays
  EXPECT_EQ(device.live.begin()->first, kept);
  const DeviceMemoryStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.device_frees, 2);
  allocator.release(kept);
}

// Every statistic after every step of a random sequence, against the stand-in's own counts and
// a model of what is live.
TEST(CachingAllocator, StatisticsAddUpExactly) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  std::mt19937_64 rng(7);
  const size_t sizes[] = {1, 511, 4096, 100000, kMiB, kMiB + 1, 3 * kMiB + 5, 9 * kMiB};
  const cudaStream_t streams[] = {kCompute, kCopy};
  struct Live {
    void* ptr;
    size_t bytes;
  };
  std::vector<Live> live;
  int64_t peak = 0;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng() % 5 < 3) {
      const size_t bytes = sizes[rng() % std::size(sizes)];
      live.push_back({allocator.allocate(bytes, streams[rng() % 2]), bytes});
    } else {
      const size_t i = rng() % live.size();
      allocator.release(live[i].ptr);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    }
    if (step % 500 == 499) allocator.empty_cache();
    int64_t allocated = 0, requested = 0;
    for (const Live& l : live) {
      allocated += static_cast<int64_t>(rounded_block_size(l.bytes));
      requested += static_cast<int64_t>(l.bytes);
    }
    peak = std::max(peak, allocated);
    const DeviceMemoryStats s = allocator.stats();
    ASSERT_EQ(s.allocated_bytes, allocated) << "step " << step;
    ASSERT_EQ(s.requested_bytes, requested) << "step " << step;
    ASSERT_EQ(s.active_blocks, static_cast<int64_t>(live.size())) << "step " << step;
    ASSERT_EQ(s.peak_allocated_bytes, peak) << "step " << step;
    ASSERT_EQ(s.reserved_bytes, static_cast<int64_t>(device.used)) << "step " << step;
    ASSERT_EQ(s.segments, static_cast<int64_t>(device.live.size())) << "step " << step;
    ASSERT_EQ(s.device_mallocs, device.mallocs) << "step " << step;
    ASSERT_EQ(s.device_frees, device.frees) << "step " << step;
    ASSERT_GE(s.peak_reserved_bytes, s.reserved_bytes);
  }
  // No two live blocks overlap.
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.ptr < b.ptr; });
  for (size_t i = 1; i < live.size(); ++i)
    ASSERT_LE(static_cast<char*>(live[i - 1].ptr) + rounded_block_size(live[i - 1].bytes),
              static_cast<char*>(live[i].ptr));
  for (const Live& l : live) allocator.release(l.ptr);
  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, 0);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
  EXPECT_TRUE(device.live.empty());
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheRetriesOnceThenNamesEveryNumber) {
  FakeDevice device;
  device.capacity = 10 * kMiB;
  CachingAllocator allocator(0, device);
  allocator.release(allocator.allocate(6 * kMiB, kCompute));  // 6 MiB cached
  void* b = allocator.allocate(8 * kMiB, kCompute);           // fits once the cache is gone
  EXPECT_EQ(allocator.stats().alloc_retries, 1);
  EXPECT_EQ(allocator.stats().device_frees, 1);
  const std::string message = testing::error_of([&] { allocator.allocate(4 * kMiB, kCompute); });
  for (const char* part : {"cuda:0 is out of memory", "allocating 4.00 MiB (4194304 bytes)",
                           "releasing 0 cached segment(s)", "8.00 MiB (8388608 bytes) allocated",
                           "8.00 MiB (8388608 bytes) reserved",
                           "the device's 10.00 MiB (10485760 bytes) (2.00 MiB free)",
                           "training.batch_size", "model.recompute", "parallel.tp", "parallel.pp"})
    EXPECT_TRUE(testing::contains(message, part));
  EXPECT_EQ(message.find('\n'), std::string::npos);  // one line
  const DeviceMemoryStats s = allocator.stats();
  EXPECT_EQ(s.ooms, 1);
  EXPECT_EQ(s.alloc_retries, 2);
  EXPECT_EQ(device.failed_mallocs, 3);  // each retry and each failure is one failed cudaMalloc
  allocator.release(b);
}

TEST(CachingAllocator, DirectModeMallocsExactSizesAndFreesAtOnce) {
  FakeDevice device;
  CachingAllocator allocator(0, device, cuda::CachingAllocatorOptions{.cache = false});
  void* a = allocator.allocate(1000, kCompute);
  EXPECT_EQ(device.live.at(a), 1000u);  // a checker sees the tensor's own bounds
  allocator.release(a);
  EXPECT_EQ(device.frees, 1);
  void* b = allocator.allocate(1000, kCompute);
  allocator.record_stream(b, kCopy);
  device.busy.insert(kCopy);
  allocator.release(b);
  EXPECT_EQ(device.frees, 1);  // waits for the copy stream
  device.finish(kCopy);
  allocator.empty_cache();
  EXPECT_EQ(device.frees, 2);
  // Switching caching on keeps blocks; off again gives the free segments back.
  allocator.set_caching(true);
  allocator.release(allocator.allocate(1000, kCompute));
  EXPECT_EQ(device.live.size(), 1u);
  allocator.set_caching(false);
  EXPECT_TRUE(device.live.empty());
}

TEST(CachingAllocator, ThreadsAllocatingAndReleasingTogetherKeepItConsistent) {
  FakeDevice device;
  CachingAllocator allocator(0, device);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<void*> mine;
      for (int i = 0; i < 3000; ++i) {
        if (mine.empty() || rng() % 2 == 0) {
          mine.push_back(allocator.allocate(512u << (rng() % 14), t % 2 ? kCopy : kCompute));
        } else {
          allocator.release(mine.back());
          mine.pop_back();
        }
      }
      for (void* p : mine) allocator.release(p);
    });
  }
  for (std::thread& t : threads) t.join();
  const DeviceMemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.active_blocks, 0);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(device.used));
  allocator.empty_cache();
  EXPECT_TRUE(device.live.empty());
}

// ====================== the allocator behind cuda Storage (needs a device) ====================

// Caching on for one test (braid_test_gpu_simt also runs the kernel tests without it).
class ScopedCaching {
 public:
  explicit ScopedCaching(bool cache) : previous_(cuda::set_default_caching(cache)) {}
  ~ScopedCaching() { cuda::set_default_caching(previous_); }

 private:
  bool previous_;
};

#ifdef BRAID_SIMT
// Every allocation and free the emulated CUDA runtime has seen so far.
uint64_t runtime_allocations() {
  const simt::RuntimeCallCounts c = simt::runtime_call_counts();
  return c.malloc + c.free + c.malloc_async + c.free_async;
}
#endif

TEST(DeviceAllocator, AFreedTensorsMemoryIsHandedOutAgain) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  ScopedCaching caching(true);
  const Device gpu = Device::cuda();
  // Large blocks of a size no other test keeps: after empty_cache the compute stream's large
  // pool holds nothing that could be a better fit than the block freed here.
  empty_device_cache(gpu);
  const int64_t numel = (3 << 20) / 4 + 1000;
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({numel}, DType::f32, gpu);
    first = t.data_ptr();
  }
  const DeviceMemoryStats before = device_memory_stats(gpu);
  Tensor again = Tensor::empty({numel - 100}, DType::f32, gpu);  // the same rounded class
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(device_memory_stats(gpu).device_mallocs, before.device_mallocs);
  // Small blocks merge with free neighbours when freed, so the best fit may be another hole;
  // either way no new segment.
  { Tensor small = Tensor::empty({1000}, DType::f32, gpu); }
  const int64_t mallocs = device_memory_stats(gpu).device_mallocs;
  { Tensor small = Tensor::empty({1000}, DType::f32, gpu); }
  EXPECT_EQ(device_memory_stats(gpu).device_mallocs, mallocs);
}

TEST(DeviceAllocator, StatisticsThroughCoreMatchTheAllocator) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  ScopedCaching caching(true);
  const DeviceMemoryStats before = device_memory_stats(Device::cuda());
  {
    Tensor t = Tensor::empty({1000}, DType::f32, Device::cuda());
    const DeviceMemoryStats during = device_memory_stats(Device::cuda());
    EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, 4096);
    EXPECT_EQ(during.requested_bytes - before.requested_bytes, 4000);
    EXPECT_EQ(during.active_blocks - before.active_blocks, 1);
    const DeviceMemoryStats direct = cuda::device_allocator(0).stats();
    EXPECT_EQ(direct.allocated_bytes, during.allocated_bytes);
    EXPECT_EQ(direct.reserved_bytes, during.reserved_bytes);
  }
  const DeviceMemoryStats after = device_memory_stats(Device::cuda());
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes);
  reset_device_peak(Device::cuda());
  EXPECT_EQ(device_memory_stats(Device::cuda()).peak_allocated_bytes, after.allocated_bytes);
  empty_device_cache(Device::cuda());
  EXPECT_LE(device_memory_stats(Device::cuda()).reserved_bytes, after.reserved_bytes);
}

// One "training step" of device work: tensors created, uploaded, used by kernels with scratch
// memory (sum, layer-norm backward), cuBLAS, and read back. Returns a checksum of its results.
double device_step(const Tensor& x_host, const Tensor& w_host) {
  const Device gpu = Device::cuda();
  Tensor x = x_host.to(gpu);
  Tensor w = w_host.to(gpu);
  const int64_t rows = x.shape()[0], cols = x.shape()[1], out_cols = w.shape()[1];
  Tensor h = Tensor::empty({rows, out_cols}, DType::f32, gpu);
  cuda::gemm(x, false, w, false, 1.0f, 0.0f, h);
  Tensor g = Tensor::empty({rows, out_cols}, DType::f32, gpu);
  cuda::gelu_forward(h, g);
  Tensor p = Tensor::empty({rows, out_cols}, DType::f32, gpu);
  cuda::softmax_forward(g, p);
  Tensor gamma = Tensor::full({out_cols}, 1.0f).to(gpu);
  Tensor beta = Tensor::full({out_cols}, 0.0f).to(gpu);
  Tensor y = Tensor::empty({rows, out_cols}, DType::f32, gpu);
  Tensor mean = Tensor::empty({rows}, DType::f32, gpu);
  Tensor rstd = Tensor::empty({rows}, DType::f32, gpu);
  cuda::layer_norm_forward(p, gamma, beta, 1e-5f, y, mean, rstd);
  Tensor dx = Tensor::empty({rows, out_cols}, DType::f32, gpu);
  Tensor dgamma = Tensor::empty({out_cols}, DType::f32, gpu);
  Tensor dbeta = Tensor::empty({out_cols}, DType::f32, gpu);
  cuda::layer_norm_backward(p, gamma, mean, rstd, y, dx, dgamma, dbeta);
  double total = 0, squares = 0;
  cuda::sum(dx, &total, &squares);
  const std::vector<float> back = dgamma.to(Device::cpu()).to_vector();
  (void)cols;
  return squares + back[0] + back[static_cast<size_t>(out_cols) - 1];
}

TEST(DeviceAllocator, RepeatedStepsMakeNoDeviceMallocsAfterAWarmUp) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  ScopedCaching caching(true);
  const Tensor x = testing::randn({48, 80}, 1);
  const Tensor w = testing::randn({80, 72}, 2);
  const double expected = device_step(x, w);  // warm-up: the pools fill
  EXPECT_EQ(device_step(x, w), expected);
  const DeviceMemoryStats before = device_memory_stats(Device::cuda());
#ifdef BRAID_SIMT
  const uint64_t runtime_before = runtime_allocations();
#endif
  for (int step = 0; step < 20; ++step) ASSERT_EQ(device_step(x, w), expected) << "step " << step;
  const DeviceMemoryStats after = device_memory_stats(Device::cuda());
  EXPECT_EQ(after.device_mallocs, before.device_mallocs);
  EXPECT_EQ(after.device_frees, before.device_frees);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);  // nothing leaked
  EXPECT_EQ(after.active_blocks, before.active_blocks);
#ifdef BRAID_SIMT
  // The runtime's own count: no cudaMalloc, cudaFree, cudaMallocAsync or cudaFreeAsync at all.
  EXPECT_EQ(runtime_allocations(), runtime_before);
#endif
}

TEST(DeviceAllocator, AllocationsTheRuntimeSawMatchTheStatistics) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
#ifndef BRAID_SIMT
  GTEST_SKIP() << "counts cudaMalloc calls through the SIMT emulator's runtime";
#else
  cuda::ensure_registered();
  CachingAllocator allocator(0, cuda::cuda_allocator_backend());
  const simt::RuntimeCallCounts before = simt::runtime_call_counts();
  std::vector<void*> blocks;
  cudaStream_t stream = cuda::device_stream(0, StreamRole::compute);
  for (size_t bytes : {size_t{100}, size_t{5000}, 3 * kMiB, size_t{700}, 12 * kMiB})
    blocks.push_back(allocator.allocate(bytes, stream));
  for (void* p : blocks) allocator.release(p);
  for (size_t bytes : {size_t{100}, size_t{5000}, 3 * kMiB, size_t{700}, 12 * kMiB})
    allocator.release(allocator.allocate(bytes, stream));
  const DeviceMemoryStats s = allocator.stats();
  EXPECT_EQ(s.device_mallocs, 3);  // one small segment, two large
  EXPECT_EQ(simt::runtime_call_counts().malloc - before.malloc, 3u);
  allocator.empty_cache();
  EXPECT_EQ(simt::runtime_call_counts().free - before.free, 3u);
  EXPECT_EQ(allocator.stats().device_frees, 3);
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
#endif
}

TEST(DeviceAllocator, OutOfMemoryNamesTheRequestAndTheDevicesNumbers) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  ScopedCaching caching(true);
  size_t device_free = 0, device_total = 0;
  {
    cuda::DeviceGuard guard(0);
    ASSERT_EQ(cudaMemGetInfo(&device_free, &device_total), cudaSuccess);
  }
  // More than the whole device: no retry can help.
  const int64_t numel = static_cast<int64_t>(device_total / 4) + (int64_t{1} << 28);
  const std::string message =
      testing::error_of([&] { Tensor::empty({numel}, DType::f32, Device::cuda()); });
  const DeviceMemoryStats s = device_memory_stats(Device::cuda());
  for (const std::string& part :
       {std::string("cuda:0 is out of memory"), fmt::format("({} bytes)", numel * 4),
        fmt::format("({} bytes) allocated", s.allocated_bytes),
        fmt::format("({} bytes) reserved", s.reserved_bytes),
        fmt::format("the device's {} ({} bytes)", braid::format_bytes(device_total), device_total),
        std::string("training.batch_size"), std::string("model.recompute"),
        std::string("parallel.tp or parallel.pp")})
    EXPECT_TRUE(testing::contains(message, part));
  EXPECT_GE(s.ooms, 1);
}

#ifdef BRAID_SIMT
// A small emulated device: the cache is released and the request retried before failing.
class SmallEmulatedDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cuda::ensure_registered();
    empty_device_cache(Device::cuda());
    size_t device_free = 0, device_total = 0;
    ASSERT_EQ(cudaMemGetInfo(&device_free, &device_total), cudaSuccess);
    limit_ = device_total - device_free + 64 * kMiB;  // what is live now, plus 64 MiB
    simt::set_emulated_memory_limit(limit_);
  }
  void TearDown() override { simt::set_emulated_memory_limit(0); }
  size_t limit_ = 0;
};

TEST_F(SmallEmulatedDevice, ARequestThatFitsOnlyWithoutTheCacheSucceedsAfterARetry) {
  ScopedCaching caching(true);
  const Device gpu = Device::cuda();
  { Tensor cached = Tensor::empty({40 * 1024 * 256}, DType::f32, gpu); }  // 40 MiB, then cached
  const DeviceMemoryStats before = device_memory_stats(gpu);
  Tensor big = Tensor::empty({48 * 1024 * 256}, DType::f32, gpu);  // 48 MiB: 40 + 48 > 64
  const DeviceMemoryStats after = device_memory_stats(gpu);
  EXPECT_EQ(after.alloc_retries, before.alloc_retries + 1);
  EXPECT_EQ(after.device_frees, before.device_frees + 1);
  EXPECT_EQ(after.ooms, before.ooms);
  const std::string message =
      testing::error_of([&] { Tensor::empty({48 * 1024 * 256}, DType::f32, gpu); });
  const DeviceMemoryStats failed = device_memory_stats(gpu);
  for (const std::string& part :
       {std::string("allocating 48.00 MiB (50331648 bytes) failed"),
        fmt::format("{} ({} bytes) allocated", braid::format_bytes(failed.allocated_bytes),
                    failed.allocated_bytes),
        fmt::format("{} ({} bytes) reserved", braid::format_bytes(failed.reserved_bytes),
                    failed.reserved_bytes),
        fmt::format("the device's {} ({} bytes)", braid::format_bytes(limit_), limit_),
        std::string("training.batch_size"), std::string("model.recompute: true"),
        std::string("parallel.tp or parallel.pp")})
    EXPECT_TRUE(testing::contains(message, part));
  EXPECT_EQ(failed.ooms, after.ooms + 1);
}
#endif

TEST(DeviceAllocator, MemoryUsedOnTheCopyStreamReturnsAfterItsEvent) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  ScopedCaching caching(true);
  const Device gpu = Device::cuda();
  const Stream copy = Stream::copy(gpu);
  const Tensor values = testing::randn({(5 << 20) / 4 + 3}, 3);
  std::vector<float> read_back(values.numel());
  void* first = nullptr;
  empty_device_cache(gpu);  // as above: the freed block is the only fit afterwards
  {
    Tensor t = values.to(gpu);
    first = t.data_ptr();
    // Read on the copy stream, after the compute stream's upload.
    Event uploaded;
    uploaded.record(Stream::compute(gpu));
    copy.wait(uploaded);
    copy_async(read_back.data(), Device::cpu(), t.data_ptr(), gpu, t.nbytes(), copy);
    record_stream(*t.storage(), copy);
  }
  copy.synchronize();
  EXPECT_EQ(read_back, values.to_vector());
  // The release's event on the copy stream has completed: the block is back in the pool.
  Tensor again = Tensor::empty({values.numel()}, DType::f32, gpu);
  EXPECT_EQ(again.data_ptr(), first);
}

TEST(DeviceAllocator, DirectModeGivesEveryBlockBack) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  ScopedCaching direct(false);
  const DeviceMemoryStats before = device_memory_stats(Device::cuda());
  { Tensor t = Tensor::empty({1000}, DType::f32, Device::cuda()); }
  const DeviceMemoryStats after = device_memory_stats(Device::cuda());
  EXPECT_EQ(after.device_mallocs, before.device_mallocs + 1);
  EXPECT_EQ(after.device_frees, before.device_frees + 1);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_CUDA
