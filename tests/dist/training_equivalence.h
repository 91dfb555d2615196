// Shared pieces of the strategy-equivalence tests: a per-rank byte corpus, a training run
// recorded as losses and final parameters, and the comparison against single-process training.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "braid/dist/process_group.h"
#include "braid/nn/shard_spec.h"
#include "braid/train/trainer.h"

namespace braid::dist::testing {

// A small byte corpus written into a folder of this rank's own (no sharing, no races).
std::filesystem::path write_corpus(const std::string& prefix, int rank);

struct TrainingRun {
  std::vector<float> losses;
  std::map<std::string, Tensor> params;         // this rank's (possibly sharded) parameters
  std::map<std::string, Tensor> first_grads;    // their gradients of step 1 (before clipping)
  std::map<std::string, nn::ShardSpec> shards;  // where each sits in the whole parameter
};

// Trains `steps` optimizer steps under `world` (null: alone) and records the run.
TrainingRun train(train::TrainConfig config, ProcessGroupPtr world, int steps);

// Per-step losses within 1e-5 relative.
void expect_same_losses(const TrainingRun& actual, const TrainingRun& expected,
                        const std::string& what);

// Each step-1 gradient of this rank's parameters (its shard of each; a pipeline stage holds
// some of them) within 1e-5 of the largest gradient of that parameter in `expected`: fp32 round-off
// of the same sums in another order. (Not for ZeRO-1, whose parameters' .grad holds the rank's own
// unreduced gradient.)
void expect_same_first_gradients(const TrainingRun& actual, const TrainingRun& expected,
                                 const std::string& what);

// Losses within 1e-5 relative; each parameter (this rank's shard of it) within 1e-5 of its
// scale of the same slice of `expected`, a single-process or equally sharded run. One slice
// is special: the key part of each attention's qkv bias adds a constant to every score of a
// query row, which softmax ignores, so its true gradient is exactly 0 and what the runs see
// there is round-off noise that Adam normalises into steps of up to lr per step. It is held
// to that bound.
void expect_same_training(const TrainingRun& actual, const TrainingRun& expected,
                          const std::string& what, double learning_rate);

// `reference` (a whole parameter of a single-process run) cut to `shard`. The tensor-parallel
// layout may pad the vocabulary further: those extra embedding rows are zero in values and
// gradients, and are added as zeros.
Tensor slice_of_reference(const Tensor& reference, const nn::ShardSpec& shard);

}  // namespace braid::dist::testing
