// braid-ckpt convert: reshards a checkpoint offline into another (tp, pp, dp) layout, writing
// the files every rank of that layout would have written (so it loads without resharding).
#include <cstdio>
#include <memory>
#include <set>

#include "braid/ckpt/checkpoint.h"
#include "braid/core/command_line.h"
#include "braid/nn/gpt.h"
#include "braid/optim/optimizer.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/train/trainer.h"
#include "ckpt/shard_writer.h"
#include "commands.h"

namespace braid::ckpt_tool {
namespace {

int number(const Args& a, const std::string& flag, int fallback) {
  if (!a.has(flag)) return fallback;
  const int v = static_cast<int>(parse_integer("--" + flag, a.flags.at(flag)));
  BRAID_CHECK(v >= 1, "--{} must be >= 1, got {}", flag, v);
  return v;
}

}  // namespace

int run_convert(const std::vector<std::string>& args) {
  const std::string usage =
      "braid-ckpt convert PATH OUT_DIR --tp T --pp P [--dp D] [--virtual-stages V] "
      "[--stage-layers 3,2,2,1] [--sequence-parallel]";
  const Args a =
      parse_args(args, {"--sequence-parallel"},
                 {"--tp", "--pp", "--dp", "--virtual-stages", "--stage-layers"}, 2, usage);
  const Checkpoint source = open_checkpoint(a.positional[0]);
  const fs::path out = a.positional[1];
  const int tp = number(a, "--tp", 1), pp = number(a, "--pp", 1), dp = number(a, "--dp", 1);
  const int chunks = number(a, "--virtual-stages", 1);
  const bool sp = a.has("--sequence-parallel");
  std::vector<int64_t> stage_layers;
  if (a.has("--stage-layers")) {
    std::string list = a.flags.at("--stage-layers");
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      stage_layers.push_back(parse_integer("--stage-layers", list.substr(at, comma - at)));
      at = comma + 1;
    }
  }

  // The model and optimizer the checkpoint was trained with, now laid out as asked.
  train::TrainConfig config = train::parse_config(source.manifest.config(), "the stored config");
  auto* par = config.proto.mutable_parallel();
  par->set_tp(tp);
  par->set_pp(pp);
  par->set_dp(dp);
  par->set_virtual_stages(chunks);
  par->set_sequence_parallel(sp);
  par->clear_stage_layers();
  for (int64_t n : stage_layers) par->add_stage_layers(static_cast<int32_t>(n));
  const nn::GptConfig gpt = train::gpt_config(config);
  const std::string problem = gpt.tensor_parallel_problem(tp);
  BRAID_CHECK(problem.empty(), "{}", problem);
  const parallel::pipeline::ScheduleShape shape{pp, 1, chunks};
  const auto ranges =
      parallel::pipeline::split_layers(gpt.n_layer, shape.virtual_stages(), stage_layers);
  const auto& o = config.optimizer();

  const std::string step_name = ckpt::step_folder_name(source.manifest.step());
  const fs::path tmp = out / (step_name + ".tmp");
  fs::create_directories(out);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const ckpt::Layout layout{{"tp", tp}, {"cp", 1}, {"dp", dp}, {"pp", pp}};
  int writers = 0;
  for (int stage = 0; stage < pp; ++stage) {
    for (int t = 0; t < tp; ++t) {
      nn::GptStagePart part = nn::GptStagePart::whole(gpt);
      if (pp > 1) {
        part.chunks = parallel::pipeline::stage_chunks(ranges, shape, stage);
        part.embeddings = stage == 0;
        part.head = stage == pp - 1;
      }
      nn::Gpt model(
          gpt, tp > 1 ? std::make_shared<nn::LayoutOnlyTensorParallel>(t, tp, sp) : nullptr, part);
      auto optimizer = optim::make_optimizer(
          o.name(),
          optim::decay_groups(model.named_parameters(), static_cast<float>(o.weight_decay())),
          {static_cast<float>(o.beta1()), static_cast<float>(o.beta2()),
           static_cast<float>(o.eps())},
          static_cast<float>(o.momentum()));
      ckpt::load_checkpoint(source.folder.string(), model, *optimizer, layout, {true, false});
      // What this rank writes, as the Checkpointer decides: tp rank 0 writes what every tp
      // rank holds whole, and the first stage writes the tied embedding.
      std::set<std::string> not_mine = ckpt::whole_parameters_written_by_tp0(model, t);
      if (!part.embeddings && model.wte) not_mine.insert("wte.weight");
      ckpt::RankState mine = ckpt::collect_rank_state(
          model, *optimizer,
          ckpt::shards_to_write(optim::whole_parameters(*optimizer), not_mine, true), not_mine,
          /*with_unoptimized=*/true);
      // World rank of (tp t, dp 0, pp stage) in the grid's order tp, cp, dp, pp.
      const int rank = t + tp * dp * stage;
      ckpt::write_rank_shard(tmp, rank, mine.entries, mine.param_steps, source.manifest.step());
      ++writers;
    }
  }
  proto::Manifest global = source.manifest;
  global.clear_tensors();
  global.clear_param_steps();
  global.mutable_grid()->clear();
  for (const auto& [axis, size] : layout) (*global.mutable_grid())[axis] = size;
  global.set_config(train::to_text(config));
  ckpt::commit_checkpoint(out, tmp, global, writers, /*keep=*/0);
  std::printf("wrote %s: step %lld as tp=%d pp=%d dp=%d (%d shard files)\n",
              (out / step_name).string().c_str(), static_cast<long long>(global.step()), tp, pp, dp,
              writers);
  return 0;
}

}  // namespace braid::ckpt_tool
