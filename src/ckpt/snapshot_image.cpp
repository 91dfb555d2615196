// snapshot_values: the checkpoint copy, checksummed on the way, into a file-shaped image.
#include "snapshot_image.h"

#include <algorithm>
#include <cstring>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "braid/ckpt/crc32c.h"
#include "braid/core/error.h"
#include "braid/core/pinned_memory.h"
#include "device_copies.h"

namespace braid::ckpt {
namespace {

bool dense_on_host(const Tensor& t) {
  return t.device().is_cpu() && t.is_contiguous();
}

// Whether an entry's values go into the image: dense host tensors (copied by the host) and
// device tensors (copied by DMA).
bool goes_into_image(const Tensor& t) {
  return dense_on_host(t) || !t.device().is_cpu();
}

// Copies with non-temporal stores where `to` is 16-byte aligned: the image is read next by
// the disk, not by a core, so its lines need not be read first nor evict training's data
// from the caches.
void stream_copy(char* to, const char* from, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(to) % 16 == 0) {
    for (; i + 64 <= n; i += 64) {
      const auto* src = reinterpret_cast<const __m128i*>(from + i);
      auto* dst = reinterpret_cast<__m128i*>(to + i);
      const __m128i a = _mm_loadu_si128(src), b = _mm_loadu_si128(src + 1);
      const __m128i c = _mm_loadu_si128(src + 2), d = _mm_loadu_si128(src + 3);
      _mm_stream_si128(dst, a);
      _mm_stream_si128(dst + 1, b);
      _mm_stream_si128(dst + 2, c);
      _mm_stream_si128(dst + 3, d);
    }
    _mm_sfence();  // streamed stores are weakly ordered: publish them before moving on
  }
#endif
  std::memcpy(to + i, from + i, n - i);
}

}  // namespace

int64_t image_bytes(const std::vector<ShardEntry>& entries) {
  int64_t bytes = 0;
  for (const ShardEntry& e : entries)
    if (goes_into_image(e.values))
      bytes += round_up_to_block(static_cast<int64_t>(e.values.nbytes()));
  return bytes;
}

Device entries_device(const std::vector<ShardEntry>& entries) {
  std::vector<Tensor> values;
  for (const ShardEntry& e : entries) values.push_back(e.values);
  return device_of(values, "the checkpoint's state");
}

StoragePtr touched_image(int64_t bytes, const std::atomic<bool>* stop, Device for_device) {
  StoragePtr image = pinned_storage(static_cast<size_t>(bytes), for_device);
  constexpr int64_t kPiece = int64_t{2} << 20;  // one huge page
  char* base = static_cast<char*>(image->data());
  for (int64_t begin = 0; begin < bytes; begin += kPiece) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) break;
    std::memset(base + begin, 0, static_cast<size_t>(std::min(kPiece, bytes - begin)));
  }
  return image;
}

void snapshot_values(std::vector<ShardEntry>& entries, StoragePtr reuse) {
  PendingCopies pending = snapshot_values_async(entries, std::move(reuse));
  complete_snapshot(entries, pending, /*all_threads=*/true);
}

PendingCopies snapshot_values_async(std::vector<ShardEntry>& entries, StoragePtr reuse) {
  std::vector<size_t> in_image, others;
  std::vector<Tensor> device_sources(entries.size());
  PendingCopies pending;
  int64_t image_bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    ShardEntry& e = entries[i];
    if (!goes_into_image(e.values)) {
      others.push_back(i);
      continue;
    }
    if (!e.values.device().is_cpu()) {
      // Made dense on the device first (a kernel on the compute stream, before the copies'
      // event is recorded); the DMA then moves one dense range.
      device_sources[i] = e.values.contiguous();
      pending.entries.push_back(i);
    }
    in_image.push_back(i);
    e.image_offset = image_bytes;
    image_bytes += round_up_to_block(static_cast<int64_t>(e.values.nbytes()));
  }
  if (image_bytes > 0) {
    // Device state is copied by DMA, which needs pinned memory; host state takes any.
    const Device device = entries_device(entries);
    StoragePtr image = reuse && static_cast<int64_t>(reuse->bytes()) == image_bytes &&
                               (device.is_cpu() || is_pinned(*reuse))
                           ? std::move(reuse)
                           : pinned_storage(static_cast<size_t>(image_bytes), device);
    char* base = static_cast<char*>(image->data());
    // The copy runs chunk by chunk over all threads. Each chunk is checksummed in L1-sized
    // pieces, each just before it is copied: checksum and copy are both bound by reading
    // memory, so together they take about what the copy alone takes, and the writer thread
    // never reads the copy again.
    constexpr int64_t kPieceBytes = int64_t{16} << 10;
    struct Chunk {
      size_t entry;
      int64_t begin, length;
    };
    std::vector<Chunk> chunks;
    std::vector<const char*> sources(entries.size());
    std::vector<DeviceToHost> dma;
    for (size_t i : in_image) {
      ShardEntry& e = entries[i];
      const int64_t bytes = static_cast<int64_t>(e.values.nbytes());
      // The gap after an entry is zeroed: the file must not carry whatever the recycled
      // buffer held before.
      std::memset(base + e.image_offset + bytes, 0,
                  static_cast<size_t>(round_up_to_block(bytes) - bytes));
      e.chunk_crc32c.assign(static_cast<size_t>((bytes + kChunkBytes - 1) / kChunkBytes), 0);
      if (device_sources[i].defined()) {
        dma.push_back({base + e.image_offset, device_sources[i]});
      } else {
        for (int64_t begin = 0; begin < bytes; begin += kChunkBytes)
          chunks.push_back({i, begin, std::min(kChunkBytes, bytes - begin)});
        sources[i] = static_cast<const char*>(e.values.data_ptr());
      }
      const int64_t element = static_cast<int64_t>(dtype_size(e.values.dtype()));
      e.values =
          Tensor::from_storage(image, e.values.shape(), e.values.dtype(), e.image_offset / element);
    }
    // Enqueued first, so that the DMA runs while the host copies its part.
    if (!dma.empty()) pending.done = copy_to_host(device, dma, /*compute_waits=*/true);
    const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int64_t k = 0; k < n; ++k) {
      const Chunk& c = chunks[static_cast<size_t>(k)];
      const char* from = sources[c.entry] + c.begin;
      char* to = base + entries[c.entry].image_offset + c.begin;
      uint32_t crc = 0;
      for (int64_t at = 0; at < c.length; at += kPieceBytes) {
        const size_t length = static_cast<size_t>(std::min(kPieceBytes, c.length - at));
        crc = crc32c(from + at, length, crc);
        stream_copy(to + at, from + at, length);
      }
      entries[c.entry].chunk_crc32c[static_cast<size_t>(c.begin / kChunkBytes)] = crc;
    }
  }
  std::vector<Tensor> views;
  for (size_t i : others) views.push_back(entries[i].values);
  std::vector<Tensor> copies = clone_all(views);
  for (size_t k = 0; k < others.size(); ++k) entries[others[k]].values = std::move(copies[k]);
  return pending;
}

void complete_snapshot(std::vector<ShardEntry>& entries, PendingCopies& pending, bool all_threads) {
  if (!pending.done) return;
  pending.done->synchronize();
  struct Chunk {
    size_t entry;
    int64_t begin, length;
  };
  std::vector<Chunk> chunks;
  for (size_t i : pending.entries) {
    const int64_t bytes = static_cast<int64_t>(entries[i].values.nbytes());
    for (int64_t begin = 0; begin < bytes; begin += kChunkBytes)
      chunks.push_back({i, begin, std::min(kChunkBytes, bytes - begin)});
  }
  const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1) if (all_threads && n > 1)
  for (int64_t k = 0; k < n; ++k) {
    const Chunk& c = chunks[static_cast<size_t>(k)];
    ShardEntry& e = entries[c.entry];
    const char* from = static_cast<const char*>(e.values.data_ptr()) + c.begin;
    e.chunk_crc32c[static_cast<size_t>(c.begin / kChunkBytes)] =
        crc32c(from, static_cast<size_t>(c.length), 0);
  }
  pending = PendingCopies{};
}

StoragePtr image_of(const std::vector<ShardEntry>& entries) {
  StoragePtr image;
  for (const ShardEntry& e : entries) {
    if (e.image_offset < 0) continue;
    if (!image) image = e.values.storage();
    BRAID_CHECK(e.values.storage() == image,
                "checkpoint entry '{}' lies in a second snapshot image; one shard file takes "
                "one image",
                e.name);
  }
  return image;
}

}  // namespace braid::ckpt
