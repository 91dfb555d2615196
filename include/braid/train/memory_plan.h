// The memory plan of a training run, from its config alone: per rank of the layout, the bytes of
// parameters, gradients, optimizer state, activations and communication buffers at the step's
// peak, so a run that cannot fit stops before it starts (braid-plan memory, the Trainer's check).
//
// The plan follows what braid allocates (docs/memory.md walks through each term): f32 tensors
// throughout, the tensors each op saves for its backward (src/ops, src/nn), recompute keeping
// only each block's input, the CPU's fused cross-entropy gradient written over the logits,
// DataParallel's flat buffers and ZeRO-1's shards (src/parallel/data_parallel.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/core/device.h"
#include "braid/train/config.h"

namespace braid::train {

// The activations of one way of running the step (recompute and sequence parallelism on or
// off), at the step's peak.
struct ActivationVariant {
  bool recompute = false;
  bool sequence_parallel = false;
  int64_t bytes = 0;
  bool configured = false;  // the variant the config asks for
};

// What one rank holds at the peak of a training step (steady state: from the second step on,
// when gradients and optimizer state exist). Bytes.
struct RankMemory {
  std::vector<int> ranks;  // world ranks with exactly this plan
  int pp_stage = 0;        // of these ranks
  int64_t parameter_count = 0;
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;  // AdamW's two moments (ZeRO-1: this rank's shard), SGD momentum
  int64_t activations = 0;      // the configured variant
  int64_t comm_buffers = 0;     // ZeRO-1's reduce-scatter target, pipeline receive buffers
  // ZeRO-1's copies of this rank's updated chunks for the all-gather, made in the optimizer
  // step, after the backward freed the activations: the total takes the larger of the two.
  int64_t update_copies = 0;
  // parameters + gradients + optimizer state + comm buffers + max(activations, update copies)
  int64_t total = 0;
  std::vector<ActivationVariant> variants;  // every variant this layout can run

  // Everything but which ranks: two ranks with equal numbers share one line.
  bool same_numbers(const RankMemory& other) const;
};

struct MemoryPlan {
  std::string device;    // training.device
  std::string strategy;  // resolved: none, ddp, zero1 (+pipeline when pp > 1)
  std::string schedule;  // the pipeline schedule; "" when pp = 1
  std::string optimizer;
  int tp = 1, pp = 1, dp = 1, virtual_stages = 1, micro_batches = 1;
  int batch_size = 0, seq_len = 0, grad_accum_steps = 1;
  int64_t vocab_size = 0, padded_vocab = 0;
  bool recompute = false, sequence_parallel = false;
  std::vector<RankMemory> groups;  // every world rank in exactly one group, ordered by first rank

  const RankMemory& for_rank(int world_rank) const;
  int64_t max_total() const;
};

// The plan of a config; throws braid::Error listing its problems when it is not valid (as
// validate() does, except that training.device "cuda" needs no visible device here).
MemoryPlan plan_memory(const TrainConfig& config);

// Human-readable: the layout, then one table row per group of equal ranks ("ranks 0-3") with
// every term, then every activation variant, the configured one marked.
std::string memory_plan_table(const MemoryPlan& plan);
// The same as one JSON object (bytes as integers).
std::string memory_plan_json(const MemoryPlan& plan);

// The environment variable that turns the Trainer's start-of-run memory check off ("1").
inline constexpr const char* kSkipMemoryCheckEnv = "BRAID_SKIP_MEMORY_CHECK";

// MemAvailable of /proc/meminfo in bytes (what the kernel can hand out without swapping); -1
// when it cannot be read.
int64_t host_available_bytes();

// The start-of-run check of one rank: "" when the bytes it still needs (`rank.total` minus what
// it holds already, `held_bytes`, times the ranks sharing the memory, `sharing_ranks`) fit
// `free_bytes` of `where` ("host memory (MemAvailable)", "cuda:0"); otherwise the line the
// Trainer stops with: what the plan needs, what is free, and what would help.
std::string memory_check_problem(const MemoryPlan& plan, const RankMemory& rank, int64_t held_bytes,
                                 int64_t free_bytes, int sharing_ranks, const std::string& where);

// The Trainer's start-of-run check for `world_rank` training on `device`: "" when the plan fits
// what is free there (the device's free bytes plus what braid's allocator caches unused; on the
// CPU MemAvailable, shared by the ranks the launcher puts on this machine:
// OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or SLURM_NTASKS_PER_NODE), when `env` sets
// BRAID_SKIP_MEMORY_CHECK=1, or when the free memory cannot be read; else memory_check_problem's
// line. `env` looks a variable up, nullptr when unset, as std::getenv does.
std::string start_of_run_memory_problem(const TrainConfig& config, int world_rank, Device device,
                                        const std::function<const char*(const char*)>& env);

}  // namespace braid::train
