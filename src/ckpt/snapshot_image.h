// A rank's checkpoint tensors copied into one buffer laid out as its data file will be.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "braid/core/storage.h"
#include "braid/core/stream.h"
#include "shard_writer.h"

namespace braid::ckpt {

// Replaces each entry's values by a private copy (training goes on changing the originals).
// The dense host tensors among them are copied into one image: a buffer (on huge pages when
// it is 4 MiB or more) holding each at a block-aligned `image_offset`, zeros between, so that
// the writer thread can hand the whole buffer to the disk with direct I/O, with no staging
// copy. Their chunks' checksums are taken during the copy (`chunk_crc32c`). Other host entries
// are cloned and left for the writer to checksum. Entries on a device go into the image too,
// copied as snapshot_values_async does, and waited for. `reuse`: an earlier image, used again
// when it has exactly the size needed (and is pinned, for device entries; no one may still read
// it); otherwise a new one is made.
void snapshot_values(std::vector<ShardEntry>& entries, StoragePtr reuse = nullptr);

// Device copies still in flight after snapshot_values_async.
struct PendingCopies {
  std::shared_ptr<Event> done;  // null: nothing is in flight
  std::vector<size_t> entries;  // the entries copied off the device: checksums still to take
};
// snapshot_values, but entries on a device are copied by DMA into the image (then pinned host
// memory) on the device's copy stream, after the work the compute stream has been given so far,
// and the call returns once they are enqueued; the compute stream waits for them before its
// later work, which may change the state. Their checksums are not taken yet: complete_snapshot
// takes them on the host copy. Until then nothing may read the image.
[[nodiscard]] PendingCopies snapshot_values_async(std::vector<ShardEntry>& entries,
                                                  StoragePtr reuse = nullptr);
// Waits for `pending`'s copies and checksums the entries they filled (then `pending` is empty).
// `all_threads`: over the OpenMP threads (training waits for it); else on the calling thread.
void complete_snapshot(std::vector<ShardEntry>& entries, PendingCopies& pending, bool all_threads);

// The device the entries' values live on (the CPU when all are on the host).
Device entries_device(const std::vector<ShardEntry>& entries);

// The size of the image snapshot_values would make for `entries`.
int64_t image_bytes(const std::vector<ShardEntry>& entries);

// An image of `bytes` whose pages are faulted in (zeroed) 2 MiB at a time until all are or
// `stop` becomes true; the rest then fault in when first written. Fresh memory costs most on
// its first touch (on a VM the host may provide a huge page's backing only then), so a checkpointer
// prepares its image off the training thread, and stops that work when a checkpoint needs the image
// sooner. The image is pinned for `for_device` (a snapshot of device state copies into it by DMA).
StoragePtr touched_image(int64_t bytes, const std::atomic<bool>* stop = nullptr,
                         Device for_device = Device::cpu());

// The image the entries' values live in (all entries with an image offset share it); null
// when none does.
StoragePtr image_of(const std::vector<ShardEntry>& entries);

}  // namespace braid::ckpt
