// The K-step window of an overlapped checkpoint (DESIGN.md section 5): the state a rank owns
// is cut into K blocks; block i is copied after step t0 + i, the gradients of later steps are
// recorded for the blocks already copied, and when the last block is copied AdamW replays the
// missed updates on the older blocks so every block reaches step t0 + K - 1. The replay calls
// the same AdamW kernel with the same learning rate, clip scale, step counts and skip
// decisions as the live update, on the same flat ranges, so the result is bitwise the state a
// synchronous snapshot would copy.
//
// Copies that training does not have to wait for run on a helper thread: block 0 (copied when
// the window opens) and every later block but the last are copied while the next step's
// forward and backward run, which do not touch the state; the next live update waits for the
// copy first. The replay runs on whichever thread calls finish(), the checkpoint writer's.
#pragma once

#include <atomic>
#include <deque>
#include <string>
#include <vector>

#include "braid/core/background_task.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/owned_state.h"

namespace braid::ckpt {

class OverlappedWindow {
 public:
  // Starts the window right after a step: splits `shards` (what this rank writes, from its
  // strategy's owned_state) into `blocks` groups of similar size and starts copying group 0.
  // The shards must hold AdamW state; every later call must pass the same shards, in order.
  OverlappedWindow(const optim::AdamWOptions& adamw, const std::vector<optim::StateShard>& shards,
                   int blocks);
  // Destroying a window waits for a copy still running and drops its error (abandoned).

  // Before the live update of a step: waits for the block copy still running (the update is
  // about to change what it reads), then records what the update will use for the copied
  // blocks.
  void before_update(const std::vector<optim::StateShard>& shards, float lr, float grad_scale,
                     bool skipped);
  // After the live update: starts copying the next block, or copies the last one here; true
  // once every block is copied. Then call finish().
  bool after_update(const std::vector<optim::StateShard>& shards);
  // Replays the recorded updates on the blocks copied before them, so that every copy is the
  // state after the step whose after_update returned true. Touches only the window's private
  // copies, so it may run on another thread while training goes on.
  void finish();

  // Shard i's copied values and state, valid once finish() returned.
  struct ShardCopy {
    Tensor value, exp_avg, exp_avg_sq;
    int64_t steps = 0;
  };
  const std::vector<ShardCopy>& copies() const { return copies_; }
  bool complete() const { return finished_; }
  // Bytes copied so far (parameters, moments and recorded gradients).
  int64_t bytes_copied() const { return bytes_copied_; }

  // The size of every copy a window over `shards` in `blocks` blocks makes, each the bytes of
  // one tensor: per shard its value and two moments, and one gradient for each step after
  // the one its block is copied at. A checkpointer allocates and touches blocks of these
  // sizes ahead of a first window (Checkpointer::prepare), so that the allocator's cache
  // hands the window memory already faulted in.
  static std::vector<int64_t> copy_sizes(const std::vector<optim::StateShard>& shards, int blocks);

 private:
  struct Update {
    float lr = 0, grad_scale = 1;
    bool skipped = false;
    int first_block = 0;        // blocks [0, first_block) were copied when it was recorded
    std::vector<Tensor> grads;  // per shard (undefined outside those blocks or no gradient)
  };
  void check_same(const std::vector<optim::StateShard>& shards) const;
  void copy_block(const std::vector<optim::StateShard>& shards, int block);
  void start_copy(const std::vector<optim::StateShard>& shards, int block);
  void replay(size_t shard);  // the recorded updates its copy missed

  int blocks_;
  int copied_ = 0;  // blocks copied or being copied
  bool finished_ = false;
  std::vector<int> block_of_;  // shard -> block
  std::vector<ShardCopy> copies_;
  std::deque<Update> updates_;
  optim::AdamWOptions adamw_;
  std::vector<float> weight_decay_;
  std::atomic<int64_t> bytes_copied_{0};
  BackgroundTask copier_;  // copying one block while training goes on
};

}  // namespace braid::ckpt
