// The emulated device's global memory: one PROT_NONE arena, a first-fit allocator in it with guard
// gaps and a quarantine, the one-bit-per-byte initialisation shadow, and the DeviceAccess guard.
#include "simt/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "braid/core/error.h"

namespace braid::simt {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee
// Every allocation is followed by an unallocated gap as large as itself (256 B .. 2 MiB), so an
// index that runs past the end by up to the allocation's size lands in no live allocation and
// the checker reports it instead of silently reading a neighbour.
constexpr size_t kMinGap = 256;
constexpr size_t kMaxGap = size_t{2} << 20;
// Freed blocks wait in a FIFO before they are reused, so a kernel using a pointer freed a moment
// ago reads unallocated memory (a fault) rather than somebody's new tensor.
constexpr size_t kMaxQuarantine = size_t{256} << 20;
// H100 SXM's global memory: the capacity until the runtime sets its device model's.
constexpr size_t kDefaultCapacity = size_t{81559} << 20;

size_t round_up(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

// Address space reserved for a capacity: the gaps can double what the allocations use, plus
// room for fragmentation. Reserving costs nothing (PROT_NONE, MAP_NORESERVE).
size_t reservation_for(size_t capacity) {
  return round_up(2 * capacity + (size_t{1} << 30), size_t{2} << 20);
}

struct Live {
  Allocation info;
  size_t offset = 0;
  size_t rounded = 0;  // bytes counted against the capacity
  size_t block = 0;    // rounded + gap: what goes back to the free list
};

class DeviceMemory {
 public:
  // Leaked on purpose: cuda Storage frees device memory from static destructors at exit.
  static DeviceMemory& instance() {
    static DeviceMemory* memory = new DeviceMemory;
    return *memory;
  }

  char* base() const { return base_.load(std::memory_order_acquire); }
  size_t reserved() const { return reserved_.load(std::memory_order_acquire); }
  uint64_t* shadow() const { return shadow_.load(std::memory_order_acquire); }
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  void set_capacity(size_t bytes) {
    std::lock_guard access(access_mutex_);
    std::unique_lock lock(mutex_);
    if (base() != nullptr && reservation_for(bytes) > reserved()) {
      if (!live_.empty() || pending_ > 0 || access_count_ > 0)
        throw Error(
            fmt::format("simt: device memory cannot grow to {} bytes while {} allocations are live",
                        bytes, live_.size() + pending_));
      unreserve();
    }
    capacity_ = bytes;
  }

  size_t capacity() {
    std::shared_lock lock(mutex_);
    return capacity_;
  }

  size_t in_use() {
    std::shared_lock lock(mutex_);
    return in_use_;
  }

  void* allocate(size_t bytes) {
    if (bytes == 0) return nullptr;
    size_t offset = 0, rounded = 0, block = 0;
    char* arena = nullptr;
    {
      std::unique_lock lock(mutex_);
      ensure_reserved();
      arena = base();
      if (bytes > capacity_ || in_use_ + round_up(bytes, kAlignment) > capacity_) return nullptr;
      rounded = round_up(bytes, kAlignment);
      block = rounded + std::clamp(rounded, kMinGap, kMaxGap);
      if (!take_first_fit(block, &offset)) {
        drain_quarantine(0);
        if (!take_first_fit(block, &offset)) return nullptr;
      }
      in_use_ += rounded;  // claimed now, so concurrent allocations see the capacity taken
      ++pending_;
    }
    // Poison (0xff bytes read as NaN) and mark uninitialised before anyone sees the pointer.
    {
      DeviceAccess access;
      std::memset(arena + offset, 0xff, rounded);
    }
    uint64_t* words = shadow();
    for (size_t w = offset / 64; w < (offset + rounded) / 64; ++w)
      std::atomic_ref<uint64_t>(words[w]).store(0, std::memory_order_relaxed);
    std::unique_lock lock(mutex_);
    Live live;
    live.info = Allocation{arena + offset, bytes, next_id_++};
    live.offset = offset;
    live.rounded = rounded;
    live.block = block;
    live_.emplace(arena + offset, live);
    --pending_;
    generation_.fetch_add(1, std::memory_order_acq_rel);
    return arena + offset;
  }

  bool free(void* ptr) {
    std::unique_lock lock(mutex_);
    auto it = live_.find(static_cast<const char*>(ptr));
    if (it == live_.end()) return false;
    const Live live = it->second;
    live_.erase(it);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    in_use_ -= live.rounded;
    quarantine_.emplace_back(live.offset, live.block);
    quarantined_ += live.block;
    drain_quarantine(std::min(capacity_ / 8, kMaxQuarantine));
    return true;
  }

  // The live allocation holding [p, p + bytes), and the generation it was found in.
  const Allocation* lookup(const char* p, size_t bytes, uint64_t* generation) {
    std::shared_lock lock(mutex_);
    *generation = generation_.load(std::memory_order_acquire);
    auto it = live_.upper_bound(p);
    if (it == live_.begin()) return nullptr;
    --it;
    const Allocation& a = it->second.info;
    if (p - a.base > static_cast<ptrdiff_t>(a.bytes) ||
        bytes > a.bytes - static_cast<size_t>(p - a.base))
      return nullptr;
    return &a;
  }

  void open() {
    std::lock_guard access(access_mutex_);
    if (access_count_ > 0) {
      ++access_count_;
      return;
    }
    char* arena = nullptr;
    {
      std::unique_lock lock(mutex_);
      ensure_reserved();
      arena = base();
    }
    if (mprotect(arena, reserved(), PROT_READ | PROT_WRITE) != 0)
      throw Error(fmt::format("simt: opening device memory failed: {}", std::strerror(errno)));
    access_count_ = 1;
  }

  void close() {
    std::lock_guard access(access_mutex_);
    if (--access_count_ > 0) return;
    if (mprotect(base(), reserved(), PROT_NONE) != 0) {
      // A destructor cannot throw, and device memory left open would hide every later host
      // touch: stop here.
      std::fprintf(stderr, "simt: re-protecting device memory failed: %s\n", std::strerror(errno));
      std::abort();
    }
  }

 private:
  DeviceMemory() = default;

  // Under mutex_ (unique).
  void ensure_reserved() {
    if (base() != nullptr) return;
    const size_t bytes = reservation_for(capacity_);
    void* arena =
        mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED)
      throw Error(fmt::format(
          "simt: reserving {} bytes of address space for device memory failed: {} (the arena "
          "needs vm.overcommit_memory 0 or 1)",
          bytes, std::strerror(errno)));
    // The shadow is ordinary memory whose pages the kernel provides on first touch.
    void* bits = mmap(nullptr, bytes / 8, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (bits == MAP_FAILED) {
      munmap(arena, bytes);
      throw Error(fmt::format("simt: reserving the {}-byte initialisation shadow failed: {}",
                              bytes / 8, std::strerror(errno)));
    }
    // The arena starts with a gap too, so an index below the first allocation stays in the arena
    // (a fault the checker names) instead of pointing at host memory.
    free_.clear();
    free_.emplace(kMaxGap, bytes - kMaxGap);
    quarantine_.clear();
    quarantined_ = 0;
    shadow_.store(static_cast<uint64_t*>(bits), std::memory_order_release);
    reserved_.store(bytes, std::memory_order_release);
    base_.store(static_cast<char*>(arena), std::memory_order_release);
  }

  void unreserve() {
    munmap(base(), reserved());
    munmap(shadow(), reserved() / 8);
    base_.store(nullptr, std::memory_order_release);
    shadow_.store(nullptr, std::memory_order_release);
    reserved_.store(0, std::memory_order_release);
    free_.clear();
    quarantine_.clear();
    quarantined_ = 0;
  }

  bool take_first_fit(size_t block, size_t* offset) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < block) continue;
      *offset = it->first;
      const size_t rest = it->second - block;
      free_.erase(it);
      if (rest > 0) free_.emplace(*offset + block, rest);
      return true;
    }
    return false;
  }

  // Returns the oldest quarantined blocks to the free list until at most `keep` bytes wait.
  void drain_quarantine(size_t keep) {
    while (quarantined_ > keep && !quarantine_.empty()) {
      auto [offset, length] = quarantine_.front();
      quarantine_.pop_front();
      quarantined_ -= length;
      release(offset, length);
    }
  }

  void release(size_t offset, size_t length) {
    // Give the whole pages back to the kernel: a long run must not keep every byte it ever used.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t first = round_up(offset, page), last = (offset + length) / page * page;
    if (last > first) madvise(base() + first, last - first, MADV_DONTNEED);
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + length == next->first) {
      length += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += length;
        return;
      }
    }
    free_.emplace(offset, length);
  }

  std::atomic<char*> base_{nullptr};
  std::atomic<size_t> reserved_{0};
  std::atomic<uint64_t*> shadow_{nullptr};
  // Bumped by every allocation and free: find_allocation's per-thread cache is valid only for
  // the generation it was filled in.
  std::atomic<uint64_t> generation_{1};

  std::shared_mutex mutex_;  // everything below but the access count
  size_t capacity_ = kDefaultCapacity;
  size_t in_use_ = 0;
  uint64_t next_id_ = 1;
  size_t pending_ = 0;                // allocations claimed but not yet live (being poisoned)
  std::map<const char*, Live> live_;  // map nodes never move: find_allocation returns &info
  std::map<size_t, size_t> free_;     // offset -> length, coalesced
  std::deque<std::pair<size_t, size_t>> quarantine_;
  size_t quarantined_ = 0;

  // Taken before mutex_ wherever both are held.
  std::mutex access_mutex_;
  int access_count_ = 0;
};

// Shadow bit b describes arena byte b; words are 64 bytes' worth.
size_t arena_offset(const void* ptr) {
  return static_cast<size_t>(static_cast<const char*>(ptr) - DeviceMemory::instance().base());
}

uint64_t low_bits(size_t n) {
  return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
}

// The n (<= 64) shadow bits starting at `bit`.
uint64_t load_bits(const uint64_t* words, size_t bit, size_t n) {
  const size_t w = bit / 64, s = bit % 64;
  uint64_t value = std::atomic_ref<const uint64_t>(words[w]).load(std::memory_order_relaxed) >> s;
  if (s + n > 64)
    value |= std::atomic_ref<const uint64_t>(words[w + 1]).load(std::memory_order_relaxed)
             << (64 - s);
  return value & low_bits(n);
}

// Sets the bits of `mask` in word w to those of `value`, leaving the others as they are (other
// threads may be marking neighbouring bytes of the same word).
void store_masked(uint64_t* words, size_t w, uint64_t mask, uint64_t value) {
  std::atomic_ref<uint64_t> word(words[w]);
  if (mask == ~uint64_t{0}) {
    word.store(value, std::memory_order_relaxed);
    return;
  }
  uint64_t old = word.load(std::memory_order_relaxed);
  while (
      !word.compare_exchange_weak(old, (old & ~mask) | (value & mask), std::memory_order_relaxed)) {
  }
}

void store_bits(uint64_t* words, size_t bit, size_t n, uint64_t value) {
  const size_t w = bit / 64, s = bit % 64;
  const size_t first = std::min(n, 64 - s);
  store_masked(words, w, low_bits(first) << s, value << s);
  if (first < n) store_masked(words, w + 1, low_bits(n - first), value >> first);
}

// Clips [ptr, ptr + bytes) to the arena; false when nothing of it lies there.
bool arena_range(const void* ptr, size_t bytes, size_t* offset, size_t* length) {
  if (bytes == 0 || !in_device_arena(ptr)) return false;
  *offset = arena_offset(ptr);
  *length = std::min(bytes, DeviceMemory::instance().reserved() - *offset);
  return true;
}

}  // namespace

void set_device_memory_capacity(size_t bytes) {
  DeviceMemory::instance().set_capacity(bytes);
}
size_t device_memory_capacity() {
  return DeviceMemory::instance().capacity();
}
size_t device_memory_in_use() {
  return DeviceMemory::instance().in_use();
}

void* device_allocate(size_t bytes) {
  return DeviceMemory::instance().allocate(bytes);
}
bool device_free(void* ptr) {
  return DeviceMemory::instance().free(ptr);
}

const Allocation* find_allocation(const void* ptr, size_t bytes) {
  // A per-thread cache of the last few allocations hit, valid for one generation, so the
  // checker's lookup per access usually costs one atomic load and no lock.
  struct Entry {
    uint64_t generation = 0;
    const Allocation* allocation = nullptr;
  };
  thread_local Entry cache[4];
  thread_local unsigned next = 0;
  const char* p = static_cast<const char*>(ptr);
  bytes = std::max<size_t>(bytes, 1);
  DeviceMemory& memory = DeviceMemory::instance();
  const uint64_t generation = memory.generation();
  for (const Entry& e : cache) {
    if (e.generation != generation) continue;
    const Allocation& a = *e.allocation;
    if (p >= a.base && bytes <= a.bytes && static_cast<size_t>(p - a.base) <= a.bytes - bytes)
      return &a;
  }
  uint64_t found_in = 0;
  const Allocation* a = memory.lookup(p, bytes, &found_in);
  if (a != nullptr) cache[next++ % 4] = Entry{found_in, a};
  return a;
}

bool in_device_arena(const void* ptr) {
  const DeviceMemory& memory = DeviceMemory::instance();
  const char* base = memory.base();
  const char* p = static_cast<const char*>(ptr);
  return base != nullptr && p >= base && static_cast<size_t>(p - base) < memory.reserved();
}

DeviceAccess::DeviceAccess() {
  DeviceMemory::instance().open();
}
DeviceAccess::~DeviceAccess() {
  DeviceMemory::instance().close();
}

void mark_initialized(const void* ptr, size_t bytes) {
  size_t offset = 0, length = 0;
  if (!arena_range(ptr, bytes, &offset, &length)) return;
  uint64_t* words = DeviceMemory::instance().shadow();
  size_t bit = offset;
  const size_t end = offset + length;
  while (bit < end) {
    const size_t n = std::min<size_t>(end - bit, 64 - bit % 64);
    store_bits(words, bit, n, ~uint64_t{0});
    bit += n;
  }
}

const void* first_uninitialized(const void* ptr, size_t bytes) {
  size_t offset = 0, length = 0;
  if (!arena_range(ptr, bytes, &offset, &length)) return nullptr;
  const uint64_t* words = DeviceMemory::instance().shadow();
  size_t bit = offset;
  const size_t end = offset + length;
  while (bit < end) {
    const size_t n = std::min<size_t>(end - bit, 64 - bit % 64);
    const uint64_t missing = ~load_bits(words, bit, n) & low_bits(n);
    if (missing != 0)
      return DeviceMemory::instance().base() + bit + static_cast<size_t>(__builtin_ctzll(missing));
    bit += n;
  }
  return nullptr;
}

void copy_initialization(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (!in_device_arena(src)) {  // host bytes are initialised by definition
    mark_initialized(dst, bytes);
    return;
  }
  if (!in_device_arena(dst)) return;
  uint64_t* words = DeviceMemory::instance().shadow();
  const size_t s = arena_offset(src), d = arena_offset(dst);
  bytes = std::min(bytes, DeviceMemory::instance().reserved() - std::max(s, d));
  // As memmove: backwards when the destination overlaps the source's tail.
  const bool backwards = d > s && d < s + bytes;
  const size_t chunks = (bytes + 63) / 64;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t i = (backwards ? chunks - 1 - c : c) * 64;
    const size_t n = std::min<size_t>(64, bytes - i);
    store_bits(words, d + i, n, load_bits(words, s + i, n));
  }
}

}  // namespace braid::simt
