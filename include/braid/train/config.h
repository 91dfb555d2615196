// Training configuration: load a protobuf text file, fill defaults, apply command-line overrides,
// validate with messages that point back at the line that set the bad value.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/train_config.pb.h"

namespace braid::train {

// A parsed configuration plus where each value came from, so errors can point at it.
// Read values through the accessors (`cfg.model().n_layer()`); every field has a value once
// load_config / parse_config returned, because defaults are filled in.
struct TrainConfig {
  proto::TrainConfig proto;
  // File name (or the name given to parse_config) the config was read from.
  std::string source;
  // Field path ("model.n_layer") -> 1-based line in `source` where the field was written.
  std::map<std::string, int> field_lines;
  // Field path -> the command-line flag that last set it ("--set model.n_layer=2").
  std::map<std::string, std::string> overrides;
  // Field paths that hold a default rather than a written value. Kept so defaults that derive
  // from other fields (seq_len from block_size, min_lr from lr) follow an override.
  std::set<std::string> defaulted;

  const proto::ModelConfig& model() const { return proto.model(); }
  const proto::DataConfig& data() const { return proto.data(); }
  const proto::OptimizerConfig& optimizer() const { return proto.optimizer(); }
  const proto::TrainingConfig& training() const { return proto.training(); }
  const proto::SampleConfig& sample() const { return proto.sample(); }
  const proto::ParallelConfig& parallel() const { return proto.parallel(); }
  const proto::CheckpointConfig& checkpoint() const { return proto.checkpoint(); }

  // "tiny.textproto:12", "--set model.n_layer=2", or "" when the field holds a default.
  std::string origin(const std::string& field_path) const;
};

// Reads and parses a text-format config file, then fills defaults. Does not validate (call
// validate after overrides). Throws braid::Error naming the path when the file cannot be read,
// and one "<file>:<line>:<col>: ..." line for a syntax error or an unknown field, with a
// "did you mean" suggestion for typos.
TrainConfig load_config(const std::string& path);

// Same as load_config for text already in memory; `source_name` is used in messages.
TrainConfig parse_config(const std::string& text, const std::string& source_name = "<config>");

// Gives every unset field its documented default (see src/proto/train_config.proto) and records
// it in cfg.defaulted. Idempotent. load_config / parse_config call it already.
void apply_defaults(TrainConfig& cfg);

// Every rule the config breaks, one message per problem; empty when valid. Each message names
// the field, the bad value, the rule and where the value came from.
std::vector<std::string> find_problems(const TrainConfig& cfg);

// Throws braid::Error listing every problem find_problems reports (joined with "; ").
void validate(const TrainConfig& cfg);

// "" when parallel.tp * pp * dp is `world_size`, the number of ranks the job started (known only
// at run time, so validate cannot check it); otherwise one line naming the three values, where
// each was set, and the dp that would fit.
std::string world_size_problem(const TrainConfig& cfg, int world_size);

// Applies command-line overrides and returns the arguments it did not consume, in order, so a
// binary can handle its own flags (including --config, which the caller reads).
// Understood:
//   --set <field.path>=<value>   any scalar field, value parsed for the field's type
//   --set=<field.path>=<value>
//   --steps <N>, --steps=<N>     shorthand for --set training.steps=N
// Throws braid::Error for an unknown field path (with a suggestion), a value that does not parse
// as the field's type, or a flag missing its value. Does not validate.
std::vector<std::string> apply_overrides(TrainConfig& cfg, const std::vector<std::string>& args);

// Sets one scalar field from text, as `--set path=value` does, and records `origin` (default
// "--set path=value") as where the value came from. Throws braid::Error for an unknown path
// (with a suggestion) or a value that does not parse as the field's type.
void set_field(TrainConfig& cfg, const std::string& path, const std::string& value,
               const std::string& origin = "");

// The whole command-line dance for a training binary: reads --config <path> (required), applies
// the overrides above, validates, and returns the config. Arguments not consumed go to `rest`.
// `args` excludes argv[0].
TrainConfig config_from_args(const std::vector<std::string>& args,
                             std::vector<std::string>* rest = nullptr);

// The config in text format (every field, defaults included); parse_config reads it back to an
// equal config. Used for logs and stored in checkpoints.
std::string to_text(const TrainConfig& cfg);

}  // namespace braid::train
