// braid-ckpt import: makes a braid checkpoint (step 0, weights only) from a safetensors file
// with Hugging Face GPT-2 names, so that a run resumes from it in any layout.
#include <fmt/format.h>

#include <chrono>
#include <map>

#include "braid/ckpt/gpt2_weights.h"
#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "braid/train/config.h"
#include "ckpt/shard_writer.h"
#include "commands.h"

namespace braid::ckpt_tool {
namespace {

constexpr const char* kUsage =
    "braid-ckpt import GPT2.safetensors OUT_DIR --n-head H [--padded-vocab-multiple M] "
    "[--seed S]";

// The training config the checkpoint records: the model's shape and the data order's seed.
train::TrainConfig import_config(const nn::GptConfig& g, uint64_t seed) {
  train::TrainConfig cfg;
  auto* m = cfg.proto.mutable_model();
  m->set_vocab_size(static_cast<int32_t>(g.vocab_size));
  m->set_n_layer(static_cast<int32_t>(g.n_layer));
  m->set_n_head(static_cast<int32_t>(g.n_head));
  m->set_n_embd(static_cast<int32_t>(g.n_embd));
  m->set_block_size(static_cast<int32_t>(g.block_size));
  m->set_padded_vocab_multiple(static_cast<int32_t>(g.padded_vocab_multiple));
  m->set_tie_embeddings(g.tie_embeddings);
  cfg.proto.mutable_training()->set_seed(seed);
  return cfg;
}

}  // namespace

int run_import(const std::vector<std::string>& args) {
  const Args a = parse_args(args, {}, {"--n-head", "--padded-vocab-multiple", "--seed"}, 2, kUsage);
  if (!a.has("--n-head"))
    throw UsageError(fmt::format(
        "--n-head is needed: the weights do not tell the head count (GPT-2's released models "
        "have n_embd / 64 heads); usage: {}",
        kUsage));
  const std::string& input = a.positional[0];
  const fs::path out = a.positional[1];
  const int64_t n_head = parse_integer("--n-head", a.flags.at("--n-head"));
  const int64_t multiple =
      a.has("--padded-vocab-multiple")
          ? parse_integer("--padded-vocab-multiple", a.flags.at("--padded-vocab-multiple"))
          : 64;
  // The seed of the data order a run resuming from this checkpoint takes: training.seed's
  // default unless given.
  const uint64_t seed = a.has("--seed")
                            ? static_cast<uint64_t>(parse_integer("--seed", a.flags.at("--seed")))
                            : train::parse_config("", "defaults").training().seed();

  const nn::GptConfig config = ckpt::infer_gpt2_config(load_safetensors(input), n_head, multiple);
  config.validate();
  nn::Gpt model(config);
  ckpt::load_gpt2_weights(input, model);

  const std::string step_name = ckpt::step_folder_name(0);
  BRAID_CHECK(!fs::exists(out / step_name), "{} already exists; import into an empty folder",
              (out / step_name).string());
  const fs::path tmp = out / (step_name + ".tmp");
  fs::create_directories(out);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  // Weights only, no update taken: the loader leaves the optimizer state fresh.
  std::vector<ckpt::ShardEntry> entries;
  std::map<std::string, int64_t> param_steps;
  const auto specs = model.shard_specs();
  for (const auto& [name, param] : model.named_parameters()) {
    entries.push_back({"model/" + name, param, specs.at(name)});
    param_steps[name] = 0;
  }
  ckpt::write_rank_shard(tmp, 0, entries, param_steps, 0);
  proto::Manifest global;
  global.set_format_version(ckpt::kFormatVersion);
  global.set_step(0);
  for (const char* axis : {"tp", "cp", "dp", "pp"}) (*global.mutable_grid())[axis] = 1;
  global.set_optimizer_steps(0);
  global.mutable_sampler()->set_seed(seed);
  global.mutable_sampler()->set_epoch(0);
  global.mutable_sampler()->set_position(0);
  global.set_config(train::to_text(import_config(config, seed)));
  global.set_mode("import");
  global.set_created_unix(std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
  ckpt::commit_checkpoint(out, tmp, global, 1, /*keep=*/0);
  fmt::print(
      "wrote {}: step 0, weights only ({} tensors), n_layer {} n_head {} n_embd {} vocab_size {} "
      "(padded {}) block_size {}, {} head, seed {}, from {}\n",
      (out / step_name).string(), entries.size(), config.n_layer, config.n_head, config.n_embd,
      config.vocab_size, config.padded_vocab(), config.block_size,
      config.tie_embeddings ? "tied" : "untied", seed, input);
  return 0;
}

}  // namespace braid::ckpt_tool
