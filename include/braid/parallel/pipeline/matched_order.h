// A schedule's transfers re-placed for a transport on which every send and recv holds its
// rank's communication until the peer issues the matching call (NCCL: a point-to-point call
// occupies the group's stream until matched; the stand-in blocks the calling thread).
//
// The rule relied on: if every rank issues its transfers in the order of one global sequence,
// no transfer can wait forever. The earliest unfinished transfer of that sequence has both its
// ranks past everything before it (every earlier transfer finished, and compute waits only on
// receives listed earlier), so both reach it and it completes. matched_order builds such a
// sequence by running all stages' compute orders in one sequential simulation: a compute runs
// once its input arrived, its send follows it at once, and the peer's receive is listed at the
// peer's current point of the simulation. Each pair of ranks thus issues its transfers in the
// same order, and every receive still precedes the compute that uses it.
#pragma once

#include <vector>

#include "braid/parallel/pipeline/schedule.h"

namespace braid::parallel::pipeline {

// Per stage, `computes[s]` (forward and backward actions, in the order that stage runs them)
// with the sends and receives placed as above. Throws naming the stuck stages when the compute
// orders cannot all finish (a compute order that waits for data never produced).
std::vector<std::vector<Action>> matched_order(const ComputeOrder& computes,
                                               const ScheduleShape& shape);

// The compute actions of `actions` (kind forward, or forward and backward).
std::vector<Action> compute_actions(const std::vector<Action>& actions, bool with_backward);

}  // namespace braid::parallel::pipeline
