// Writing checkpoint files: one rank's shard (data + manifest) and the commit that makes a
// folder of shards a checkpoint. Used by the Checkpointer and by braid-ckpt convert.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/nn/module.h"
#include "braid/nn/shard_spec.h"
#include "braid/optim/optimizer.h"
#include "format.h"

namespace braid::ckpt {

struct ShardEntry {
  std::string name;  // "model/<param>" or "optim/<param>/<state>"
  Tensor values;     // dense after write_rank_shard
  nn::ShardSpec shard;
};

// What one rank writes of its model and optimizer: every parameter and its optimizer state
// (with the update counts) except those named in `skip`, cloned when `copy` (training goes
// on changing the originals while an asynchronous write runs).
struct RankState {
  std::vector<ShardEntry> entries;
  std::map<std::string, int64_t> param_steps;
};
RankState collect_rank_state(const nn::Module& model, optim::Optimizer& optimizer,
                             const std::set<std::string>& skip, bool copy);

// The parameters rank `tp_rank` of a tensor-parallel group leaves to tp rank 0: those every tp
// rank holds whole (so each value is written once).
std::set<std::string> whole_parameters_written_by_tp0(const nn::Module& model, int tp_rank);

// Writes rank `rank`'s data file and RankManifest into `folder`, each fsynced. `step` only
// names the checkpoint for the fault-injection points.
void write_rank_shard(const fs::path& folder, int rank, std::vector<ShardEntry>& entries,
                      const std::map<std::string, int64_t>& param_steps, int64_t step);

// Commits the shards in `tmp` as <dir>/step_<global.step()>: merges the rank manifests found
// there (exactly `writers` of them) into `global`, writes manifest.pb, renames the folder,
// replaces `latest` and keeps the newest `keep` committed checkpoints (0: all).
void commit_checkpoint(const fs::path& dir, const fs::path& tmp, proto::Manifest global,
                       int writers, int keep);

}  // namespace braid::ckpt
