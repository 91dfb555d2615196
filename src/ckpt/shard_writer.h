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
#include "braid/optim/owned_state.h"
#include "format.h"

namespace braid::ckpt {

struct ShardEntry {
  std::string name;  // "model/<param>" or "optim/<param>/<state>"
  Tensor values;     // dense after write_rank_shard
  nn::ShardSpec shard;
  // Set by snapshot_values when `values` lies in its image: where (bytes from the image's
  // start), and the CRC-32C of each kChunkBytes chunk, taken while copying.
  int64_t image_offset = -1;
  std::vector<uint32_t> chunk_crc32c = {};
};

// The shards of `owned` this rank writes, in order: those whose parameter is not in `skip`
// (written by another rank); none when the state is replicated over data parallelism and
// this is not its first replica.
std::vector<optim::StateShard> shards_to_write(const optim::OwnedState& owned,
                                               const std::set<std::string>& skip,
                                               bool first_replica);

// What one rank writes: entries plus the update counts of its parameters.
struct RankState {
  std::vector<ShardEntry> entries;
  std::map<std::string, int64_t> param_steps;
};
// The parameters and optimizer state of `shards` (from shards_to_write), each as the boxes of
// the global tensor its flat range covers (`specs`: the model's shard specs), as views of
// `shards`' tensors (snapshot_values copies them).
RankState shard_entries(const std::map<std::string, nn::ShardSpec>& specs,
                        const std::vector<optim::StateShard>& shards);
// The model's parameters no optimizer updates (whole), except those in `skip`.
std::vector<ShardEntry> unoptimized_entries(const nn::Module& model,
                                            const optim::Optimizer& optimizer,
                                            const std::set<std::string>& skip, bool copy);
// Both of the above, uncopied: everything a rank writes; `with_unoptimized` on the rank that
// owns the unoptimized parameters (data-parallel rank 0). snapshot_values copies them.
RankState collect_rank_state(const nn::Module& model, const optim::Optimizer& optimizer,
                             const std::vector<optim::StateShard>& shards,
                             const std::set<std::string>& skip, bool with_unoptimized);

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
