// matched_order: one sequential simulation of all stages fixes the order of every transfer.
#include "braid/parallel/pipeline/matched_order.h"

#include <fmt/format.h>

#include <set>
#include <tuple>

#include "braid/core/error.h"

namespace braid::parallel::pipeline {
namespace {

std::tuple<int, int, int> key(const Action& a) {
  return {static_cast<int>(a.kind), a.microbatch, a.chunk};
}

}  // namespace

std::vector<Action> compute_actions(const std::vector<Action>& actions, bool with_backward) {
  std::vector<Action> out;
  for (const Action& a : actions)
    if (a.kind == ActionKind::forward || (with_backward && a.kind == ActionKind::backward))
      out.push_back(a);
  return out;
}

std::vector<std::vector<Action>> matched_order(const ComputeOrder& computes,
                                               const ScheduleShape& shape) {
  const int p = shape.stages;
  BRAID_CHECK(static_cast<int>(computes.size()) == p,
              "matched_order needs one compute order per stage: {} for {} stages", computes.size(),
              p);
  std::vector<std::vector<Action>> out(p);
  std::vector<std::set<std::tuple<int, int, int>>> arrived(p);  // receives listed, not used yet
  std::vector<size_t> next(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    // One compute per stage per round keeps the stages' transfers interleaved as they would
    // run in parallel, so a receive is listed close to when its data is produced.
    for (int s = 0; s < p; ++s) {
      if (next[s] == computes[s].size()) continue;
      const Action& a = computes[s][next[s]];
      if (auto need = needed_receive(a, s, shape)) {
        if (!arrived[s].count(key(*need))) continue;
        arrived[s].erase(key(*need));
      }
      out[s].push_back(a);
      ++next[s];
      progress = true;
      if (auto send = resulting_send(a, s, shape)) {
        const bool act = send->kind == ActionKind::send_activation;
        const int k = shape.virtual_stage(s, a.chunk) + (act ? 1 : -1);
        const int to = shape.stage_of(k);
        const Action recv{act ? ActionKind::recv_activation : ActionKind::recv_gradient,
                          a.microbatch, shape.chunk_of(k)};
        BRAID_CHECK(to != s, "pipeline stage {} would send {} to itself", s, send->str());
        out[s].push_back(*send);
        out[to].push_back(recv);
        arrived[to].insert(key(recv));
      }
    }
  }
  std::vector<std::string> stuck;
  for (int s = 0; s < p; ++s)
    if (next[s] < computes[s].size())
      stuck.push_back(fmt::format("stage {} at {}", s, computes[s][next[s]].str()));
  BRAID_CHECK(stuck.empty(), "the pipeline's compute orders cannot finish: {} wait for data",
              fmt::join(stuck, ", "));
  return out;
}

}  // namespace braid::parallel::pipeline
