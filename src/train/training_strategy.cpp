// make_training_strategy: the registry's strategy, inside a pipeline when pp > 1.
#include "training_strategy.h"

#include "braid/parallel/pipeline/pipeline_parallel.h"

namespace braid::train {

std::unique_ptr<parallel::Strategy> make_training_strategy(const TrainConfig& config) {
  const auto& par = config.parallel();
  const std::string name =
      par.strategy() == "auto" ? (par.dp() > 1 ? "ddp" : "none") : par.strategy();
  std::unique_ptr<parallel::Strategy> data_parallel = parallel::make_strategy(
      name,
      parallel::StrategyOptions(par.strategy_options().begin(), par.strategy_options().end()));
  if (par.pp() == 1) return data_parallel;
  parallel::pipeline::PipelineOptions o;
  o.stages = par.pp();
  o.micro_batches = par.micro_batches();
  o.virtual_stages = par.virtual_stages();
  o.schedule = par.schedule();
  o.stage_layers.assign(par.stage_layers().begin(), par.stage_layers().end());
  o.batch_size = config.training().batch_size();
  o.seq_len = config.training().seq_len();
  o.sequence_parallel = par.sequence_parallel();
  return std::make_unique<parallel::pipeline::PipelineParallel>(std::move(o),
                                                                std::move(data_parallel));
}

}  // namespace braid::train
