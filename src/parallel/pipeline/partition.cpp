// Even and explicit splits of a model's blocks over virtual pipeline stages.
#include "braid/parallel/pipeline/partition.h"

#include <fmt/format.h>

#include <numeric>

#include "braid/core/error.h"

namespace braid::parallel::pipeline {

std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t layers, int virtual_stages,
                                                      const std::vector<int64_t>& counts_given) {
  BRAID_CHECK(virtual_stages >= 1, "a pipeline needs at least one virtual stage");
  std::vector<int64_t> counts = counts_given;
  if (counts.empty()) {
    BRAID_CHECK(layers % virtual_stages == 0,
                "{} layers do not split evenly over {} virtual pipeline stages; give the blocks "
                "per virtual stage explicitly (parallel.stage_layers)",
                layers, virtual_stages);
    counts.assign(virtual_stages, layers / virtual_stages);
  }
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  BRAID_CHECK(static_cast<int>(counts.size()) == virtual_stages && total == layers &&
                  std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c >= 0; }),
              "stage layer counts [{}] do not split {} layers over {} virtual stages",
              fmt::join(counts, ", "), layers, virtual_stages);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t first = 0;
  for (int64_t c : counts) {
    ranges.emplace_back(first, first + c);
    first += c;
  }
  return ranges;
}

std::vector<std::pair<int64_t, int64_t>> stage_chunks(
    const std::vector<std::pair<int64_t, int64_t>>& virtual_ranges, const ScheduleShape& shape,
    int stage) {
  BRAID_CHECK(static_cast<int>(virtual_ranges.size()) == shape.virtual_stages(),
              "{} block ranges for {} virtual stages", virtual_ranges.size(),
              shape.virtual_stages());
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int c = 0; c < shape.chunks; ++c)
    chunks.push_back(virtual_ranges[shape.virtual_stage(stage, c)]);
  return chunks;
}

}  // namespace braid::parallel::pipeline
