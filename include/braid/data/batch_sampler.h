// BatchSampler: deterministic, resumable, data-parallel (inputs, targets) batches from a dataset.
//
// The dataset is cut into windows of seq_len + 1 tokens that never cross a shard boundary.
// Window k of a shard starts at offset + k * seq_len, so consecutive windows share one token
// (the last target of one is the first input of the next) and no token is wasted. One epoch
// visits every window once:
//   - shuffled mode: in an order given by a keyed bijection of the window indices (a Feistel
//     network driven by a counter-based hash of seed and epoch), and with a per-epoch,
//     per-shard offset in [0, seq_len) so window boundaries move between epochs. Nothing is
//     drawn from std:: distributions, so the order is the same on every platform and any
//     position can be reached in O(1), without replaying earlier batches.
//   - sequential mode (validation): windows in file order from offset 0, every epoch alike.
//
// Data parallel: each step consumes a GLOBAL batch of batch_size * dp_size windows; rank r
// takes rows [r * batch_size, (r + 1) * batch_size) of it. Hence dp_size = 2 with
// batch_size = 4 sees exactly the sequences of dp_size = 1 with batch_size = 8, and the state
// below does not depend on the rank or the dp layout it was saved under.
//
// An epoch ends when fewer than a global batch of windows is left (those few are skipped for
// this epoch; in shuffled mode different ones each epoch), so a batch never mixes epochs.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/data/batch.h"
#include "braid/data/token_dataset.h"

namespace braid::data {

struct SamplerConfig {
  int64_t batch_size = 1;  // B: rows per rank per step
  int64_t seq_len = 1024;  // T: tokens per row
  uint64_t seed = 0;       // shuffled mode only
  bool shuffle = true;     // false: sequential order, for validation
  int dp_rank = 0;
  int dp_size = 1;
};

// Where a sampler is; saved in checkpoints. Identical on every data-parallel rank.
struct SamplerState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t position = 0;  // windows of this epoch already consumed by all ranks together
  bool operator==(const SamplerState&) const = default;
};

// A window: `seq_len + 1` tokens of shard `shard` starting at token `start`.
struct WindowRef {
  int64_t shard = 0;
  int64_t start = 0;
  bool operator==(const WindowRef&) const = default;
};

class BatchSampler {
 public:
  // Throws when the config is invalid or the dataset holds fewer windows than one global
  // batch needs.
  BatchSampler(TokenDataset dataset, SamplerConfig config);

  // This rank's rows of the next global batch; then advances by one global batch.
  Batch next();

  SamplerState state() const { return {seed_, epoch_, position_}; }
  // Continues exactly where `state` was taken, even if it was saved under another dp layout
  // (then the position need not fall on a batch boundary of this layout). Adopts the state's
  // seed. Throws when the position lies beyond this dataset's epoch.
  void restore(const SamplerState& state);
  // Back to epoch 0, position 0 (e.g. before each validation pass).
  void reset() { restore({seed_, 0, 0}); }

  // Windows per epoch (independent of the epoch), and full global batches per epoch; a
  // validation pass is batches_per_epoch() calls of next() after reset().
  int64_t windows_per_epoch() const { return num_windows_; }
  int64_t batches_per_epoch() const { return num_windows_ / global_batch_; }
  int64_t global_batch_size() const { return global_batch_; }
  const SamplerConfig& config() const { return config_; }
  const TokenDataset& dataset() const { return dataset_; }

  // The window at `index` of `epoch`'s order (0 <= index < windows_per_epoch()); what next()
  // reads, exposed so tests and tools can audit the order.
  WindowRef window_at(uint64_t epoch, int64_t index) const;

 private:
  int64_t shard_offset(uint64_t epoch, int64_t shard) const;
  uint64_t permute(uint64_t epoch, uint64_t index) const;

  TokenDataset dataset_;
  SamplerConfig config_;
  int64_t global_batch_ = 0;
  // Per shard: how many windows it contributes and the largest start offset that keeps them.
  std::vector<int64_t> windows_;
  std::vector<int64_t> max_offset_;
  std::vector<int64_t> first_window_;  // prefix sums of windows_
  int64_t num_windows_ = 0;
  uint64_t seed_ = 0;
  uint64_t epoch_ = 0;
  uint64_t position_ = 0;
};

}  // namespace braid::data
