// A rank's checkpoint tensors copied into one buffer laid out as its data file will be.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "braid/core/storage.h"
#include "shard_writer.h"

namespace braid::ckpt {

// Replaces each entry's values by a private copy (training goes on changing the originals).
// The dense host tensors among them are copied into one image: a buffer (on huge pages when
// it is 4 MiB or more) holding each at a block-aligned `image_offset`, zeros between, so that
// the writer thread can hand the whole buffer to the disk with direct I/O, with no staging
// copy. Their chunks' checksums are taken during the copy (`chunk_crc32c`). Other entries
// are cloned and left for the writer to checksum. `reuse`: an earlier image, used again when
// it has exactly the size needed (no one may still read it); otherwise a new one is made.
void snapshot_values(std::vector<ShardEntry>& entries, StoragePtr reuse = nullptr);

// The size of the image snapshot_values would make for `entries`.
int64_t image_bytes(const std::vector<ShardEntry>& entries);

// An image of `bytes` whose pages are faulted in (zeroed) 2 MiB at a time until all are or
// `stop` becomes true; the rest then fault in when first written. Fresh memory costs most on
// its first touch (on this development VM, 10-100 ms for 38 MiB on huge pages, whose backing
// the host provides then), so a checkpointer prepares its image off the training thread, and
// stops that work when a checkpoint needs the image sooner.
StoragePtr touched_image(int64_t bytes, const std::atomic<bool>* stop = nullptr);

// The image the entries' values live in (all entries with an image offset share it); null
// when none does.
StoragePtr image_of(const std::vector<ShardEntry>& entries);

}  // namespace braid::ckpt
