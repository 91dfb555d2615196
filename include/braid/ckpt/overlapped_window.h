// The K-step window of an overlapped checkpoint (DESIGN.md section 5): the state a rank owns
// is cut into K blocks; block i is copied after step t0 + i, the gradients of later steps are
// recorded for the blocks already copied, and when the last block is copied AdamW replays the
// missed updates on the older blocks so every block reaches step t0 + K - 1. The replay calls
// the same AdamW kernel with the same learning rate, clip scale, step counts and skip
// decisions as the live update, on the same flat ranges, so the result is bitwise the state a
// synchronous snapshot would copy.
//
// Host state: copies that training does not have to wait for run on a helper thread: block 0
// (copied when the window opens) and every later block but the last are copied while the next
// step's forward and backward run, which do not touch the state; the next live update waits
// for the copy first. The replay runs on whichever thread calls finish(), the checkpoint
// writer's.
//
// Device state (the shards live on one device): every copy is a DMA on the device's copy stream
// into pinned host memory (one buffer per window), after an event of the compute stream, and
// the host does not wait for it. A block copied after an update runs beside the next step's
// forward and backward; the compute stream waits for it just before the next update (issued
// in before_update), and for the recorded gradients just after that update (after_update),
// before the next backward overwrites them. The last block's copy is waited for by the compute
// stream at once (no later call would order it). finish() waits for every copy on the host,
// then replays with the host AdamW, which is bitwise the device AdamW.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "braid/core/background_task.h"
#include "braid/core/stream.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/owned_state.h"

namespace braid::ckpt {

class OverlappedWindow {
 public:
  // Starts the window right after a step: splits `shards` (what this rank writes, from its
  // strategy's owned_state) into `blocks` groups of similar size and starts copying group 0.
  // The shards must hold AdamW state; every later call must pass the same shards, in order.
  // Device state: `staging` is pinned host memory for the window's copies, used when it holds
  // staging_bytes() (a buffer an earlier window handed back); otherwise one is allocated.
  OverlappedWindow(const optim::AdamWOptions& adamw, const std::vector<optim::StateShard>& shards,
                   int blocks, StoragePtr staging = nullptr);
  // Destroying a window waits for a copy still running (a helper's, or a DMA into its staging
  // memory) and drops its error (abandoned).
  ~OverlappedWindow();

  // Before the live update of a step: waits for the block copy still running (the update is
  // about to change what it reads), then records what the update will use for the copied
  // blocks.
  void before_update(const std::vector<optim::StateShard>& shards, float lr, float grad_scale,
                     bool skipped);
  // The same with the step's clip scale and skip decision as device scalars (f32 tensors of one
  // element: the scale, and nonzero for a skipped step), as a device-side clip computes them:
  // copied off the device with the step's gradients, and read by the replay. A skipped step is
  // replayed as the host flag's: no update, its step counter not advanced, whatever the
  // owner's counters say meanwhile (a device-side skip reaches the host's counts later; only
  // the counts when the window opens must be exact). Host tensors are read at once.
  void before_update(const std::vector<optim::StateShard>& shards, float lr,
                     const Tensor& grad_scale, const Tensor& skipped);
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
  // Where the state lives: the CPU, or the device the copies come off.
  Device device() const { return device_; }
  // Device state: the pinned buffer the copies live in, for the next window once nothing reads
  // the copies any more (null for host state).
  const StoragePtr& staging() const { return staging_; }
  // The pinned bytes a window over `shards` in `blocks` blocks copies into (its copies, each
  // rounded up to 64 bytes, and two scalars per step).
  static int64_t staging_bytes(const std::vector<optim::StateShard>& shards, int blocks);

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
    // Device scalars: where their host copies land (read once the copies are done), or null.
    const float* grad_scale_copy = nullptr;
    const float* skipped_copy = nullptr;
    int first_block = 0;         // blocks [0, first_block) were copied when it was recorded
    std::vector<Tensor> grads;   // per shard (undefined outside those blocks or no gradient)
    std::vector<bool> had_grad;  // per shard: whether the live update (unless skipped) ran on it
  };
  void check_same(const std::vector<optim::StateShard>& shards) const;
  void copy_block(const std::vector<optim::StateShard>& shards, int block);
  // Device state: the copies of copy_block and before_update, by DMA.
  void copy_block_off_device(const std::vector<optim::StateShard>& shards, int block,
                             bool compute_waits);
  void record_update(const std::vector<optim::StateShard>& shards, Update u,
                     const Tensor& grad_scale, const Tensor& skipped);
  Tensor take_staging(int64_t numel);  // the next free f32 [numel] of staging_
  void start_copy(const std::vector<optim::StateShard>& shards, int block);
  void replay(size_t shard);  // the recorded updates its copy missed

  int blocks_;
  int copied_ = 0;  // blocks copied or being copied
  bool finished_ = false;
  std::vector<int> block_of_;  // shard -> block
  // Each shard's update count when the window opened. A copy's count is this plus the updates
  // recorded before its copy that ran on it (not skipped, with a gradient), not the owner's
  // count at the copy: a device-side skip is counted by the host only later.
  std::vector<int64_t> steps_at_open_;
  std::vector<ShardCopy> copies_;
  std::deque<Update> updates_;
  optim::AdamWOptions adamw_;
  std::vector<float> weight_decay_;
  std::atomic<int64_t> bytes_copied_{0};
  Device device_;
  StoragePtr staging_;  // device state: pinned memory every copy is a piece of
  int64_t staged_ = 0;  // bytes of staging_ handed out
  // Device state: the copies of the last block and of the last step's gradients (the compute
  // stream waits for them before it changes their sources), and every copy, for finish().
  std::shared_ptr<Event> block_copied_, grads_copied_;
  std::vector<std::shared_ptr<Event>> copies_in_flight_;
  BackgroundTask copier_;  // host state: copying one block while training goes on
};

}  // namespace braid::ckpt
