// The stream-ordered caching allocator (see caching_allocator.h for the design): segments from
// cudaMalloc, split into blocks kept in per-stream pools, merged again when freed.
#include "caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "braid/core/byte_count.h"
#include "braid/core/error.h"
#include "cuda_check.cuh"

namespace braid::cuda {
namespace {

size_t round_up(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

struct Block;

struct Segment {
  char* base = nullptr;
  size_t bytes = 0;
  Block* head = nullptr;  // the block at `base`: merges keep the lower block, so it never changes
};

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  size_t requested = 0;  // while in use
  cudaStream_t stream = nullptr;
  Segment* segment = nullptr;
  Block* prev = nullptr;  // address-order neighbours within the segment
  Block* next = nullptr;
  bool small = false;
  bool in_use = false;
  int pending_events = 0;            // released, waiting for other streams' work
  std::vector<cudaStream_t> others;  // streams besides `stream` that used it (record_stream)
  bool is_free() const { return !in_use && pending_events == 0; }
};

// Best fit: smallest first, then lowest address, so the choice is the same every step.
struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};
using FreeBlocks = std::set<Block*, BySizeThenAddress>;

struct StreamPools {
  FreeBlocks small;
  FreeBlocks large;
};

struct PendingRelease {
  Block* block;
  cudaEvent_t event;
};

// Switches to `device` and back without throwing (releases run at exit, after the runtime).
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device_) (void)cudaSetDevice(device_);
  }
  ~QuietDeviceGuard() {
    if (previous_ >= 0 && previous_ != device_) (void)cudaSetDevice(previous_);
    (void)cudaGetLastError();
  }

 private:
  int device_;
  int previous_ = -1;
};

class CudaBackend final : public AllocatorBackend {
 public:
  cudaError_t malloc(int device, size_t bytes, void** ptr) override {
    QuietDeviceGuard guard(device);
    const cudaError_t status = cudaMalloc(ptr, bytes);
    if (status != cudaSuccess) (void)cudaGetLastError();
    return status;
  }
  void free(int device, void* ptr) override {
    QuietDeviceGuard guard(device);
    (void)cudaFree(ptr);
  }
  cudaEvent_t create_event(int device) override {
    QuietDeviceGuard guard(device);
    cudaEvent_t event = nullptr;
    // No timing: recording and querying such events is cheaper.
    BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }
  void destroy_event(int device, cudaEvent_t event) override {
    QuietDeviceGuard guard(device);
    (void)cudaEventDestroy(event);
  }
  bool record(int device, cudaEvent_t event, cudaStream_t stream) override {
    QuietDeviceGuard guard(device);
    return cudaEventRecord(event, stream) == cudaSuccess;
  }
  bool ready(int device, cudaEvent_t event) override {
    QuietDeviceGuard guard(device);
    return cudaEventQuery(event) != cudaErrorNotReady;
  }
  void synchronize(int device, cudaEvent_t event) override {
    QuietDeviceGuard guard(device);
    (void)cudaEventSynchronize(event);
  }
  void memory_info(int device, size_t* free, size_t* total) override {
    QuietDeviceGuard guard(device);
    *free = *total = 0;
    (void)cudaMemGetInfo(free, total);
  }
};

}  // namespace

size_t rounded_block_size(size_t bytes) {
  return round_up(std::max<size_t>(bytes, 1), kBlockRound);
}

AllocatorBackend& cuda_allocator_backend() {
  static CudaBackend* backend = new CudaBackend;  // never destroyed, like the allocators
  return *backend;
}

std::string out_of_memory_message(int device, size_t request, const DeviceMemoryStats& stats,
                                  size_t device_free, size_t device_total, size_t released_segments,
                                  size_t released_bytes) {
  auto both = [](size_t bytes) { return fmt::format("{} ({} bytes)", format_bytes(bytes), bytes); };
  return fmt::format(
      "cuda:{} is out of memory: allocating {} failed, also after releasing {} cached "
      "segment(s) of {} and retrying; braid has {} allocated and {} reserved of the device's {} "
      "({} free). To fit, lower training.batch_size, set model.recompute: true, or split the "
      "model over more GPUs with a larger parallel.tp or parallel.pp",
      device, both(request), released_segments, format_bytes(released_bytes),
      both(static_cast<size_t>(stats.allocated_bytes)),
      both(static_cast<size_t>(stats.reserved_bytes)), both(device_total),
      format_bytes(device_free));
}

class CachingAllocator::Impl {
 public:
  Impl(int device, AllocatorBackend& backend, CachingAllocatorOptions options)
      : device_(device), backend_(backend), cache_(options.cache) {}

  ~Impl() {
    std::lock_guard lock(mutex_);
    for (const PendingRelease& p : pending_) {
      backend_.synchronize(device_, p.event);
      backend_.destroy_event(device_, p.event);
    }
    for (cudaEvent_t e : spare_events_) backend_.destroy_event(device_, e);
    for (Segment* s : segments_) {
      for (Block* b = s->head; b != nullptr;) delete std::exchange(b, b->next);
      backend_.free(device_, s->base);
      delete s;
    }
  }

  void* allocate(size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    collect_ready_releases();
    // Direct mode keeps the request's exact size, so a checker's bounds are the tensor's.
    const size_t size = cache_ ? rounded_block_size(bytes) : bytes;
    const bool small = size <= kSmallBlockMax;
    FreeBlocks& pool = pool_of(stream, small);
    // Without caching every request gets its own exact segment, even where a free piece of a
    // segment from a caching period would fit.
    Block* block = cache_ ? take_best_fit(pool, size) : nullptr;
    if (block == nullptr) block = new_segment(bytes, size, stream, small);
    split(block, size, pool);
    block->in_use = true;
    block->requested = bytes;
    live_.emplace(block->ptr, block);
    stats_.allocated_bytes += static_cast<int64_t>(block->size);
    stats_.requested_bytes += static_cast<int64_t>(bytes);
    stats_.active_blocks += 1;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return block->ptr;
  }

  void release(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    Block* block = it->second;
    live_.erase(it);
    stats_.allocated_bytes -= static_cast<int64_t>(block->size);
    stats_.requested_bytes -= static_cast<int64_t>(block->requested);
    stats_.active_blocks -= 1;
    block->in_use = false;
    block->requested = 0;
    // Work on the other streams may still read or write the block: it waits for an event on
    // each, recorded now, i.e. after everything issued there so far.
    for (cudaStream_t other : block->others) {
      cudaEvent_t event = take_event();
      if (event == nullptr) {
        // No event, so no proof that `other` is done with the block: it never returns to a
        // pool (leaked) rather than being reused too early.
        block->pending_events += 1;
        continue;
      }
      if (!backend_.record(device_, event, other)) {
        spare_events_.push_back(event);
        continue;
      }
      pending_.push_back({block, event});
      block->pending_events += 1;
    }
    block->others.clear();
    if (block->pending_events == 0) give_back(block);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    Block* block = it->second;
    if (stream == block->stream) return;  // its own stream orders every use already
    if (std::find(block->others.begin(), block->others.end(), stream) == block->others.end())
      block->others.push_back(stream);
  }

  void empty_cache() {
    std::lock_guard lock(mutex_);
    release_cached(/*wait_for_events=*/true);
  }

  DeviceMemoryStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }

  void set_caching(bool cache) {
    std::lock_guard lock(mutex_);
    cache_ = cache;
    if (!cache_) release_cached(/*wait_for_events=*/false);
  }

  bool caching() const {
    std::lock_guard lock(mutex_);
    return cache_;
  }

  int device() const { return device_; }

 private:
  FreeBlocks& pool_of(cudaStream_t stream, bool small) {
    StreamPools& pools = pools_[stream];
    return small ? pools.small : pools.large;
  }

  static Block* take_best_fit(FreeBlocks& pool, size_t size) {
    Block probe;
    probe.size = size;
    auto it = pool.lower_bound(&probe);
    if (it == pool.end()) return nullptr;
    Block* block = *it;
    pool.erase(it);
    return block;
  }

  // A fresh segment holding one free block (not in any pool) for a request of `size`.
  Block* new_segment(size_t bytes, size_t size, cudaStream_t stream, bool small) {
    const size_t segment_bytes = !cache_ ? size
                                 : small ? kSmallSegmentBytes
                                         : round_up(size, kLargeSegmentRound);
    void* ptr = nullptr;
    if (backend_.malloc(device_, segment_bytes, &ptr) != cudaSuccess) {
      stats_.alloc_retries += 1;
      const auto [segments, released] = release_cached(/*wait_for_events=*/true);
      if (backend_.malloc(device_, segment_bytes, &ptr) != cudaSuccess) {
        stats_.ooms += 1;
        size_t device_free = 0, device_total = 0;
        backend_.memory_info(device_, &device_free, &device_total);
        BRAID_FAIL("{}", out_of_memory_message(device_, bytes, stats_, device_free, device_total,
                                               segments, released));
      }
    }
    stats_.device_mallocs += 1;
    stats_.segments += 1;
    stats_.reserved_bytes += static_cast<int64_t>(segment_bytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    auto* segment = new Segment{static_cast<char*>(ptr), segment_bytes, nullptr};
    auto* block = new Block;
    block->ptr = segment->base;
    block->size = segment_bytes;
    block->stream = stream;
    block->segment = segment;
    block->small = small;
    segment->head = block;
    segments_.insert(segment);
    return block;
  }

  // Cuts `block` (not in a pool) down to `size`, putting the remainder into `pool`. Always,
  // so that allocated_bytes is exactly the rounded requests: a large pool's remainder of 1 MiB
  // or less serves no request there, but merges back when its neighbour is freed.
  static void split(Block* block, size_t size, FreeBlocks& pool) {
    const size_t rest = block->size - size;
    if (rest == 0) return;
    auto* tail = new Block;
    tail->ptr = block->ptr + size;
    tail->size = rest;
    tail->stream = block->stream;
    tail->segment = block->segment;
    tail->small = block->small;
    tail->prev = block;
    tail->next = block->next;
    if (block->next != nullptr) block->next->prev = tail;
    block->next = tail;
    block->size = size;
    pool.insert(tail);
  }

  // A released block whose events completed: merged with free neighbours, back in its pool
  // (or, without caching, its segment back to the device once the segment is all free).
  void give_back(Block* block) {
    FreeBlocks& pool = pool_of(block->stream, block->small);
    if (Block* prev = block->prev; prev != nullptr && prev->is_free()) {
      pool.erase(prev);
      prev->size += block->size;
      prev->next = block->next;
      if (block->next != nullptr) block->next->prev = prev;
      delete block;
      block = prev;
    }
    if (Block* next = block->next; next != nullptr && next->is_free()) {
      pool.erase(next);
      block->size += next->size;
      block->next = next->next;
      if (next->next != nullptr) next->next->prev = block;
      delete next;
    }
    if (!cache_ && block->prev == nullptr && block->next == nullptr) {
      free_segment(block);
      return;
    }
    pool.insert(block);
  }

  // `block` spans its whole segment and is in no pool.
  void free_segment(Block* block) {
    Segment* segment = block->segment;
    backend_.free(device_, segment->base);
    stats_.device_frees += 1;
    stats_.segments -= 1;
    stats_.reserved_bytes -= static_cast<int64_t>(segment->bytes);
    segments_.erase(segment);
    delete block;
    delete segment;
  }

  cudaEvent_t take_event() {
    if (!spare_events_.empty()) {
      cudaEvent_t event = spare_events_.back();
      spare_events_.pop_back();
      return event;
    }
    try {
      return backend_.create_event(device_);
    } catch (const Error&) {
      return nullptr;  // release must not throw; it keeps the block out of the pools instead
    }
  }

  // Releases whose events have all completed go back to their pools.
  void collect_ready_releases(bool wait = false) {
    if (pending_.empty()) return;
    std::vector<PendingRelease> still;
    for (const PendingRelease& p : pending_) {
      if (wait) backend_.synchronize(device_, p.event);
      if (!wait && !backend_.ready(device_, p.event)) {
        still.push_back(p);
        continue;
      }
      spare_events_.push_back(p.event);
      if (--p.block->pending_events == 0) give_back(p.block);
    }
    pending_ = std::move(still);
  }

  // Gives every entirely free segment back; returns how many and their bytes.
  std::pair<size_t, size_t> release_cached(bool wait_for_events) {
    collect_ready_releases(wait_for_events);
    size_t count = 0, bytes = 0;
    for (auto& [stream, pools] : pools_) {
      for (FreeBlocks* pool : {&pools.small, &pools.large}) {
        for (auto it = pool->begin(); it != pool->end();) {
          Block* block = *it;
          if (block->prev != nullptr || block->next != nullptr) {
            ++it;
            continue;
          }
          it = pool->erase(it);
          ++count;
          bytes += block->segment->bytes;
          free_segment(block);
        }
      }
    }
    return {count, bytes};
  }

  const int device_;
  AllocatorBackend& backend_;
  bool cache_;
  mutable std::mutex mutex_;
  std::map<cudaStream_t, StreamPools> pools_;
  std::unordered_map<void*, Block*> live_;
  std::unordered_set<Segment*> segments_;
  std::vector<PendingRelease> pending_;
  std::vector<cudaEvent_t> spare_events_;
  DeviceMemoryStats stats_;
};

CachingAllocator::CachingAllocator(int device, AllocatorBackend& backend,
                                   CachingAllocatorOptions options)
    : impl_(std::make_unique<Impl>(device, backend, options)) {}
CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::allocate(size_t bytes, cudaStream_t stream) {
  return impl_->allocate(bytes, stream);
}
void CachingAllocator::release(void* ptr) {
  impl_->release(ptr);
}
void CachingAllocator::record_stream(void* ptr, cudaStream_t stream) {
  impl_->record_stream(ptr, stream);
}
void CachingAllocator::empty_cache() {
  impl_->empty_cache();
}
DeviceMemoryStats CachingAllocator::stats() const {
  return impl_->stats();
}
void CachingAllocator::reset_peak() {
  impl_->reset_peak();
}
void CachingAllocator::set_caching(bool cache) {
  impl_->set_caching(cache);
}
bool CachingAllocator::caching() const {
  return impl_->caching();
}
int CachingAllocator::device() const {
  return impl_->device();
}

namespace {

constexpr int kMaxDevices = 64;

std::mutex g_devices_mutex;
CachingAllocator* g_devices[kMaxDevices] = {};

bool caching_from_environment() {
  const char* mode = std::getenv("BRAID_CUDA_ALLOCATOR");
  if (mode == nullptr || *mode == '\0' || std::strcmp(mode, "caching") == 0) return true;
  BRAID_CHECK(std::strcmp(mode, "direct") == 0,
              "BRAID_CUDA_ALLOCATOR={} is neither 'caching' (the default) nor 'direct'", mode);
  return false;
}

// Guarded by g_devices_mutex.
bool& caching_setting() {
  static bool cache = caching_from_environment();
  return cache;
}

}  // namespace

CachingAllocator& device_allocator(int device) {
  BRAID_CHECK(device >= 0 && device < kMaxDevices, "cuda:{} is past braid's {} devices", device,
              kMaxDevices);
  std::lock_guard lock(g_devices_mutex);
  CachingAllocator*& allocator = g_devices[device];
  if (allocator == nullptr)
    allocator = new CachingAllocator(device, cuda_allocator_backend(),
                                     CachingAllocatorOptions{caching_setting()});
  return *allocator;
}

bool default_caching() {
  std::lock_guard lock(g_devices_mutex);
  return caching_setting();
}

bool set_default_caching(bool cache) {
  std::lock_guard lock(g_devices_mutex);
  const bool previous = std::exchange(caching_setting(), cache);
  for (CachingAllocator* allocator : g_devices)
    if (allocator != nullptr) allocator->set_caching(cache);
  return previous;
}

}  // namespace braid::cuda
