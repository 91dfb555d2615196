// How a model's blocks are cut into the virtual stages of a pipeline.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "braid/parallel/pipeline/schedule.h"

namespace braid::parallel::pipeline {

// Blocks [first, end) of every virtual stage, in pipeline order: `layers_per_stage` when
// given (one count per virtual stage), else an even split. Throws a clear error when the
// counts do not fit.
std::vector<std::pair<int64_t, int64_t>> split_layers(
    int64_t layers, int virtual_stages, const std::vector<int64_t>& layers_per_stage = {});

// The block ranges of `stage`'s chunks (chunk c is virtual stage c * stages + stage).
std::vector<std::pair<int64_t, int64_t>> stage_chunks(
    const std::vector<std::pair<int64_t, int64_t>>& virtual_ranges, const ScheduleShape& shape,
    int stage);

}  // namespace braid::parallel::pipeline
