// Interleaved 1F1B (Megatron-LM's virtual pipeline): each stage holds several model chunks and
// walks micro-batches in groups of `stages`, chunk by chunk, which shrinks the bubble by the
// number of chunks at the price of more communication.
#include "braid/core/error.h"
#include "braid/parallel/pipeline/schedule.h"

namespace braid::parallel::pipeline {
namespace {

// The k-th forward (or backward) of a stage: micro-batches go in groups of `stages`; within a
// group every chunk runs in turn (forward: chunk 0 first; backward: the last chunk first).
Action nth(int k, int p, int v, ActionKind kind) {
  const int group = k / (p * v), within = k % (p * v);
  const int chunk = within / p, microbatch = group * p + within % p;
  return {kind, microbatch, kind == ActionKind::forward ? chunk : v - 1 - chunk};
}

}  // namespace

ComputeOrder interleaved_one_f_one_b(const ScheduleShape& shape) {
  const int p = shape.stages, v = shape.chunks, m = shape.microbatches;
  BRAID_CHECK(m >= p,
              "interleaved_1f1b needs at least as many micro-batches as pipeline stages; got {} "
              "micro-batches for {} stages (use parallel.micro_batches >= {})",
              m, p, p);
  // Megatron's order needs whole groups of p micro-batches. Otherwise plan for the next
  // multiple of p and drop the missing micro-batches' actions: each stage's order stays a
  // subsequence of a deadlock-free schedule, and every dependency among the remaining actions
  // was already there, so it stays deadlock-free.
  const int planned = (m + p - 1) / p * p;
  const int total = planned * v;
  ComputeOrder order(p);
  for (int s = 0; s < p; ++s) {
    // Enough forwards in flight that the first backward's gradient can arrive.
    const int warmup = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
    std::vector<Action> planned_order;
    int forwards = 0, backwards = 0;
    for (; forwards < warmup; ++forwards)
      planned_order.push_back(nth(forwards, p, v, ActionKind::forward));
    while (forwards < total) {
      planned_order.push_back(nth(forwards++, p, v, ActionKind::forward));
      planned_order.push_back(nth(backwards++, p, v, ActionKind::backward));
    }
    while (backwards < total) planned_order.push_back(nth(backwards++, p, v, ActionKind::backward));
    for (const Action& a : planned_order)
      if (a.microbatch < m) order[s].push_back(a);
  }
  return order;
}

}  // namespace braid::parallel::pipeline
