// Sharded checkpoints: save (synchronous or asynchronous) and load under any parallel layout.
//
// A checkpoint is a folder <dir>/step_<N>/ holding one shard file per writing rank, one
// RankManifest per writing rank and the global manifest.pb (src/proto/checkpoint.proto).
// Every tensor slice carries its place in the single-process tensor (nn::ShardSpec) and a
// CRC-32C per chunk. Each rank writes what it owns (its strategy's owned_state), so every
// value is written once: data-parallel replica 0 for replicated state, every data-parallel
// rank its own chunks under ZeRO-1.
//
// Commit protocol (so a crash never leaves a checkpoint that looks complete):
//   1. each writer writes into <dir>/step_<N>.tmp/, fsyncs its data and its manifest;
//   2. barrier on a group of its own (never interleaved with training collectives);
//   3. rank 0 merges the rank manifests into manifest.pb (fsync), renames the folder to
//      step_<N>, then atomically replaces <dir>/latest (write + fsync + rename);
//   4. rank 0 deletes committed checkpoints beyond the newest `keep` (each manifest first, so a
//      crash mid-deletion leaves an uncommitted folder, never a damaged committed one); a last
//      barrier.
// A folder without manifest.pb is not a checkpoint; the Checkpointer sweeps such leftovers at
// start. Manifests carry a CRC-32C of their contents, slices one per chunk. The Checkpointer
// holds the directory's RunLock (braid/ckpt/run_lock.h): one run per folder. The folder must be
// visible to every rank (one machine, or a shared filesystem).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "braid/core/background_task.h"
#include "braid/data/batch_sampler.h"
#include "braid/dist/parallel_grid.h"
#include "braid/nn/module.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/owned_state.h"

namespace braid::ckpt {

enum class Mode {
  sync,        // copy and write, then return
  async,       // copy the state, return; a writer thread persists and commits it
  overlapped,  // copy 1/window of the state per step over `window` steps, replay AdamW on
               // the early blocks, then write like async (see braid/ckpt/overlapped_window.h)
};
// "sync" / "async" / "overlapped"; errors name the choices.
Mode mode_from_name(const std::string& name);

struct CheckpointOptions {
  std::string dir;
  Mode mode = Mode::sync;
  int keep = 3;    // committed checkpoints kept; 0 keeps all
  int window = 7;  // overlapped: steps (and state blocks) the copy is spread over
};

// What a training run restores besides tensors.
struct TrainingState {
  int64_t step = 0;  // optimizer steps completed
  data::SamplerState sampler;
  std::string config;  // the training config (protobuf text), for inspection
};

class Checkpointer {
 public:
  // Collective over the grid's world: creates the checkpoint's own group; rank 0 takes the
  // directory's run lock (every rank throws DirectoryInUse when another run holds it) and
  // sweeps uncommitted leftovers of a crash (logged).
  Checkpointer(CheckpointOptions options, const dist::ParallelGrid& grid);
  ~Checkpointer();  // waits for an unfinished write (errors are logged, not thrown)

  // Checkpoints the state after state.step steps: `owned` is what this rank owns of the
  // parameters and optimizer state (Strategy::owned_state). Collective over the world.
  // `skip`: parameter names this rank must not write (copies written by another rank, such
  // as the tied embedding on the last pipeline stage). A request while an asynchronous write
  // is unfinished first waits for it (logged): never skipped, never overlapping.
  // State on a device is copied by DMA on its copy stream into pinned host memory, after the
  // compute stream's work so far; the compute stream's later work waits for the copies, the
  // host does not (async returns once they are enqueued; the writer waits for them, then
  // checksums the host copy). No host code reads device memory.
  void save(const nn::Module& model, const optim::Optimizer& optimizer,
            const optim::OwnedState& owned, const TrainingState& state,
            const std::set<std::string>& skip = {});
  // Saves the current state now (one copy, then written like async) whatever the mode,
  // abandoning an open overlapped window: the end of training cannot wait for more steps.
  void save_now(const nn::Module& model, const optim::Optimizer& optimizer,
                const optim::OwnedState& owned, const TrainingState& state,
                const std::set<std::string>& skip = {});
  // Waits for the unfinished write and rethrows its error (an overlapped window still
  // copying is left running).
  void wait();
  // Allocates the buffer the next snapshot copies into (overlapped: the one its replayed
  // state is copied into before the write), and faults its pages in, on the writer thread
  // (at normal priority, unlike the writes), so that the first checkpoint does not pay for
  // first touches of fresh memory; overlapped mode also warms blocks of its window's copy sizes in
  // the host allocator's cache. A checkpoint that comes before this work is done stops it and takes
  // the buffer as it is (wait() lets it finish). Call it once the optimizer state exists
  // (after a first step); a no-op when a buffer is ready or the writer is busy.
  void prepare(const nn::Module& model, const optim::Optimizer& optimizer,
               const optim::OwnedState& owned, const std::set<std::string>& skip = {});

  // Overlapped mode: the training loop reports every step around its optimizer update. A
  // save() starts a window after step t0; the checkpoint holds the state after step
  // t0 + window - 1. A request while a window is open is skipped (logged).
  // `owned` is the rank's owned state at that moment (the same shards as at the save).
  void before_update(const optim::OwnedState& owned, float lr, float grad_scale, bool skipped);
  // The same with the clip scale and skip flag as device scalars (f32 tensors of one element on
  // the state's device; skip: nonzero), as a device-side clip leaves them: they are copied off
  // the device with the step's gradients and read when the window replays (no host sync).
  void before_update(const optim::OwnedState& owned, float lr, const Tensor& grad_scale,
                     const Tensor& skipped);
  void after_update(const optim::OwnedState& owned, const std::function<TrainingState()>& state);
  bool window_open() const { return window_steps_left_ > 0; }

  const CheckpointOptions& options() const { return options_; }
  // Bytes the last checkpoint to leave training copied in host memory: the state (sync and
  // async), or the window's blocks plus the gradients it recorded (overlapped). 0 before any.
  int64_t bytes_copied() const { return bytes_copied_; }
  // The buffer the next snapshot copies into (null: none yet). Read it only after wait():
  // the writer thread hands the buffer back when it finishes.
  const Storage* snapshot_buffer() const { return spare_image_.get(); }

 private:
  struct Pending;
  // What this rank writes of `owned`: its shards minus what other ranks write (`not_mine`).
  struct Selection {
    std::set<std::string> not_mine;
    bool first_replica = true;
    std::vector<optim::StateShard> shards;
  };
  Selection select(const nn::Module& model, const optim::OwnedState& owned,
                   const std::set<std::string>& skip) const;
  void save_as(Mode mode, const nn::Module& model, const optim::Optimizer& optimizer,
               const optim::OwnedState& owned, const TrainingState& state,
               const std::set<std::string>& skip);
  void write_and_commit(const std::shared_ptr<Pending>& job);
  // Writes `job` on the writer thread, after running `prepare` there (if given).
  void start_writer(std::shared_ptr<Pending> job, std::function<void()> prepare = {});
  void finish_window(const std::vector<optim::StateShard>& shards, int64_t optimizer_steps,
                     const TrainingState& state);
  // What of `owned` the open window copies: the same shards save() chose.
  std::vector<optim::StateShard> window_shards(const optim::OwnedState& owned) const;

  CheckpointOptions options_;
  const dist::ParallelGrid& grid_;
  dist::ProcessGroupPtr channel_;        // barriers of the commit protocol only
  std::shared_ptr<class RunLock> lock_;  // rank 0
  BackgroundTask writer_;
  // Overlapped mode: the open window, the steps it still needs, and what save() captured.
  std::shared_ptr<class OverlappedWindow> window_;
  int window_steps_left_ = 0;
  std::shared_ptr<Pending> window_job_;
  int64_t bytes_copied_ = 0;
  // The image of the last written snapshot (or one prepare() made), reused by the next: its
  // pages stay faulted in. Touched by the writer thread only while the training thread waits
  // for it.
  std::shared_ptr<Storage> spare_image_;
  // Device state in overlapped mode: the window's pinned staging buffer, kept the same way.
  std::shared_ptr<Storage> spare_staging_;
  // Set while a save waits for the writer: a prepare() still running stops early.
  std::atomic<bool> stop_preparing_{false};
};

struct LoadOptions {
  bool allow_reshard = true;          // false: a different (tp, pp, dp) layout is an error
  bool fallback_to_previous = false;  // a corrupt/partial newest checkpoint: try older ones
};

// True when `dir` holds at least one committed checkpoint.
bool has_committed_checkpoint(const std::string& dir);

// The committed checkpoint folder `path` names: a step folder itself, or the newest committed
// checkpoint of a checkpoint directory (scanned; `latest` is a hint). Throws when there is none.
std::string resolve_checkpoint(const std::string& path);

// Deletes every checkpoint in `dir` (committed or not), on rank 0 of `group` under the
// directory's run lock, for a run that starts over; every rank throws DirectoryInUse when
// another run holds the folder. Collective over `group`.
void remove_checkpoints(const std::string& dir, dist::ProcessGroup& group);

// Loads a committed checkpoint into this rank's `model` (its shards, whatever layout saved
// them) and `optimizer`, verifying the checksum of everything it reads, and returns the
// training state. The optimizer state goes into `live` (a strategy's owned_state: ZeRO-1's
// chunks, so no rank ever holds the whole state) when given, else into the optimizer's own
// per-parameter state; the step counters always go to the optimizer. A checkpoint without
// optimizer state whose optimizer took no step (braid-ckpt import) loads the weights only and
// leaves the optimizer state as it is.
// `path` is a step folder, or a checkpoint directory: then the newest committed checkpoint
// found by scanning it (`latest` is only a hint), and with fallback_to_previous the older ones
// in turn. Collective over the grid's world, on a group of its own: every rank verifies what it
// reads and all ranks load the newest checkpoint that verified on every rank, so no rank ever
// resumes from another step than its peers. When none does, every rank throws the same line
// naming, for each checkpoint tried, the ranks and the files and tensors that failed.
TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, const dist::ParallelGrid& grid,
                              const LoadOptions& options = {},
                              const optim::OwnedState* live = nullptr);
// The same in one process for a layout given as axis sizes (offline tools: no communication).
using Layout = std::map<std::string, int>;
TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, const Layout& layout,
                              const LoadOptions& options = {},
                              const optim::OwnedState* live = nullptr);

}  // namespace braid::ckpt
