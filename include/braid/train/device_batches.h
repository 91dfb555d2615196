// Training batches for a device, copied there one batch ahead of their use.
//
// The sampler makes host batches. Each is checked on the host (token ids inside the
// vocabulary, targets inside it or -1), written into a pinned host buffer and copied into fresh
// device tensors on the device's copy stream, so the copy of the next batch runs beside the
// compute of this one; the compute stream waits for it through an event, the host never does.
// The device tensors carry what the host checked (braid/ops/host_checked.h), so the embedding
// and the loss on the device read nothing back.
// Two pinned buffers alternate: one is being copied while the next batch is written to the
// other. Staging ahead means a bad batch (an id outside the vocabulary) throws one step before
// the step that would have consumed it.
#pragma once

#include <array>
#include <functional>
#include <optional>

#include "braid/core/pinned_memory.h"
#include "braid/core/stream.h"
#include "braid/data/batch.h"

namespace braid::train {

class DeviceBatches {
 public:
  // `source` makes host batches (i32 [B, T] inputs and targets); `vocab_size` bounds their ids.
  DeviceBatches(Device device, int64_t vocab_size);
  ~DeviceBatches();
  DeviceBatches(const DeviceBatches&) = delete;
  DeviceBatches& operator=(const DeviceBatches&) = delete;

  // The batch staged last (staging one from `source` first when none is), ready for work the
  // compute stream issues from now on; then stages the following batch of `source`. Calls
  // `before_source` right before each call of `source` (the Trainer keeps the sampler state
  // that precedes the staged batch there).
  data::Batch next(const std::function<data::Batch()>& source,
                   const std::function<void()>& before_source = {});
  // True when a batch is staged: `source` has been called once more than next() returned.
  bool has_staged() const { return staged_.has_value(); }
  // Forgets the staged batch (its source was replaced).
  void drop_staged() { staged_.reset(); }

 private:
  struct Slot {
    Tensor host;   // pinned i32: inputs, then targets
    Event copied;  // the copy out of `host` (and into the device tensors)
  };
  data::Batch stage(const data::Batch& host);

  Device device_;
  int64_t vocab_size_;
  std::array<Slot, 2> slots_;
  int next_slot_ = 0;
  Event allocated_;  // the compute stream's point at which the device tensors were allocated
  std::optional<data::Batch> staged_;
  Event* staged_copied_ = nullptr;
};

// Checks a host batch as the model would on the host: i32 [B, T] inputs and targets of one
// shape, ids in [0, vocab_size), targets there or -1 (ignored); names the first bad value.
void check_host_batch(const data::Batch& batch, int64_t vocab_size);

}  // namespace braid::train
