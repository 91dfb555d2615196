// The Strategy a training config asks for, composed from its parallel settings.
#pragma once

#include <memory>

#include "braid/parallel/strategy.h"
#include "braid/train/config.h"

namespace braid::train {

// parallel.strategy (auto: ddp when dp > 1, else none) with parallel.strategy_options,
// wrapped by the pipeline strategy when parallel.pp > 1 (pp composes with any data-parallel
// strategy, ZeRO-1 and strategies registered from outside included). Makes no collective.
std::unique_ptr<parallel::Strategy> make_training_strategy(const TrainConfig& config);

}  // namespace braid::train
