// Writing checkpoint files: one rank's shard (data + manifest) and the commit that makes a
// folder of shards a checkpoint. Used by the Checkpointer and by braid-ckpt convert.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/nn/shard_spec.h"
#include "format.h"

namespace braid::ckpt {

struct ShardEntry {
  std::string name;  // "model/<param>" or "optim/<param>/<state>"
  Tensor values;     // dense after write_rank_shard
  nn::ShardSpec shard;
};

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
