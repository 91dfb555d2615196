// Pipeline schedules: every schedule for pp = 2, 3, 4 and micro-batches pp and 2 pp + 1, with
// and without virtual chunks, validated deadlock-free and complete on a simulated clock; the
// bubble fraction measured there equals the analytic one where the analysis is exact and
// stays within it elsewhere; 1F1B bounds activation memory; broken schedules are caught.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/validate.h"
#include "support/test_util.h"

namespace braid::parallel::pipeline {
namespace {

struct Case {
  std::string schedule;
  ScheduleShape shape;
};

std::vector<Case> every_valid_case() {
  std::vector<Case> cases;
  for (int p : {2, 3, 4})
    for (int m : {p, 2 * p + 1}) {
      cases.push_back({"gpipe", {p, m, 1}});
      cases.push_back({"gpipe", {p, m, 2}});
      cases.push_back({"1f1b", {p, m, 1}});
      for (int v : {2, 3}) cases.push_back({"interleaved_1f1b", {p, m, v}});
    }
  return cases;
}

std::string name(const Case& c) {
  return fmt::format("{} pp={} m={} v={}", c.schedule, c.shape.stages, c.shape.microbatches,
                     c.shape.chunks);
}

TEST(PipelineSchedules, EveryScheduleIsDeadlockFreeAndComplete) {
  for (const Case& c : every_valid_case()) {
    const ScheduleReport r = validate(make_schedule(c.schedule, c.shape));
    EXPECT_GT(r.makespan, 0) << name(c);
    EXPECT_EQ(r.events.size(),
              static_cast<size_t>(2 * c.shape.stages * c.shape.microbatches * c.shape.chunks))
        << name(c);
  }
}

// With uniform costs (backward = 2 forward, free communication) GPipe and 1F1B idle exactly
// (p - 1) / (m + p - 1) of the time. Interleaving with v chunks divides the warm-up and
// cool-down by v: (p - 1) / (v m + p - 1) when the micro-batches fill whole groups of p;
// a last partial group can only add idle time, within one more group's worth.
TEST(PipelineSchedules, BubbleFractionMatchesTheAnalyticValue) {
  for (const Case& c : every_valid_case()) {
    const ScheduleReport r = validate(make_schedule(c.schedule, c.shape));
    const double analytic = r.analytic_bubble_fraction;
    if (c.schedule == "gpipe" && c.shape.chunks > 1) {
      // GPipe over chunks still waits for a whole chunk pass: no better than one chunk.
      const ScheduleShape one_chunk{c.shape.stages, c.shape.microbatches, 1};
      EXPECT_GE(r.bubble_fraction, analytic - 1e-12) << name(c);
      EXPECT_LE(r.bubble_fraction, analytic_bubble_fraction(one_chunk) + 1e-12) << name(c);
    } else if (c.schedule != "interleaved_1f1b" || c.shape.microbatches % c.shape.stages == 0) {
      EXPECT_NEAR(r.bubble_fraction, analytic, 1e-12) << name(c);
    } else {
      EXPECT_GE(r.bubble_fraction, analytic - 1e-12) << name(c);
      const int p = c.shape.stages, m = c.shape.microbatches, v = c.shape.chunks;
      const int rounded_up = (m + p - 1) / p * p;
      const double bound = 1.0 - static_cast<double>(m) / rounded_up *
                                     (1.0 - analytic_bubble_fraction({p, rounded_up, v}));
      EXPECT_LE(r.bubble_fraction, bound + 1e-12) << name(c);
    }
  }
}

// 1F1B keeps at most p - s micro-batches' activations on stage s; GPipe keeps all m.
TEST(PipelineSchedules, OneFOneBBoundsActivationMemory) {
  for (int p : {2, 3, 4}) {
    const int m = 2 * p + 1;
    const ScheduleReport f1b = validate(make_schedule("1f1b", {p, m, 1}));
    const ScheduleReport gp = validate(make_schedule("gpipe", {p, m, 1}));
    for (int s = 0; s < p; ++s) {
      EXPECT_EQ(f1b.peak_activations[s], p - s) << "1f1b pp=" << p << " stage " << s;
      EXPECT_EQ(gp.peak_activations[s], m) << "gpipe pp=" << p << " stage " << s;
    }
  }
}

TEST(PipelineSchedules, CommunicationIsPostedAheadAndPaired) {
  const Schedule s = make_schedule("1f1b", {2, 3, 1});
  // The last stage (1F1B: F0 B0 F1 ...) posts the receive of micro-batch 1's activation
  // before the backward of micro-batch 0, one compute ahead of its use.
  const auto& last = s.stages[1];
  ASSERT_GE(last.size(), 5u);
  EXPECT_EQ(last[0], (Action{ActionKind::recv_activation, 0, 0}));
  EXPECT_EQ(last[1], (Action{ActionKind::forward, 0, 0}));
  EXPECT_EQ(last[2], (Action{ActionKind::recv_activation, 1, 0}));
  EXPECT_EQ(last[3], (Action{ActionKind::backward, 0, 0}));
  EXPECT_EQ(last[4], (Action{ActionKind::send_gradient, 0, 0}));
  EXPECT_EQ(last[5], (Action{ActionKind::forward, 1, 0}));
  // Stage 0 sends each activation right after computing it.
  EXPECT_EQ(s.stages[0][0], (Action{ActionKind::forward, 0, 0}));
  EXPECT_EQ(s.stages[0][1], (Action{ActionKind::send_activation, 0, 0}));
}

TEST(PipelineSchedules, BrokenSchedulesAreCaught) {
  // Stage 0 runs the backward first: it waits for a gradient stage 1 can only send after the
  // forward stage 0 never sends.
  Schedule swapped = make_schedule("gpipe", {2, 1, 1});
  std::vector<Action>& first = swapped.stages[0];
  std::vector<Action> reordered{{ActionKind::recv_gradient, 0, 0},
                                {ActionKind::backward, 0, 0},
                                {ActionKind::forward, 0, 0},
                                {ActionKind::send_activation, 0, 0}};
  first = reordered;
  EXPECT_ERROR_CONTAINS(validate(swapped), "backward before its forward");
  // Each stage waits for the other: stage 0 wants micro-batch 0's gradient before it sends
  // micro-batch 1, stage 1 insists on micro-batch 1 first.
  Schedule cycle = make_schedule("1f1b", {2, 2, 1});
  cycle.stages[0] = {{ActionKind::forward, 0, 0},       {ActionKind::send_activation, 0, 0},
                     {ActionKind::recv_gradient, 0, 0}, {ActionKind::backward, 0, 0},
                     {ActionKind::forward, 1, 0},       {ActionKind::send_activation, 1, 0},
                     {ActionKind::recv_gradient, 1, 0}, {ActionKind::backward, 1, 0}};
  cycle.stages[1] = {{ActionKind::recv_activation, 1, 0}, {ActionKind::recv_activation, 0, 0},
                     {ActionKind::forward, 1, 0},         {ActionKind::backward, 1, 0},
                     {ActionKind::send_gradient, 1, 0},   {ActionKind::forward, 0, 0},
                     {ActionKind::backward, 0, 0},        {ActionKind::send_gradient, 0, 0}};
  EXPECT_ERROR_CONTAINS(validate(cycle), "deadlocks: stage 0 waits at B0.0, stage 1 waits at F1.0");
  // A compute whose receive was never posted.
  Schedule unposted = make_schedule("gpipe", {2, 1, 1});
  unposted.stages[1].erase(unposted.stages[1].begin());
  EXPECT_ERROR_CONTAINS(validate(unposted), "receive was never posted");
  EXPECT_ERROR_CONTAINS(make_schedule("zigzag", {2, 2, 1}), "unknown pipeline schedule 'zigzag'");
  EXPECT_ERROR_CONTAINS(make_schedule("interleaved_1f1b", {4, 3, 2}),
                        "at least as many micro-batches as pipeline stages");
  EXPECT_ERROR_CONTAINS(make_schedule("1f1b", {2, 4, 2}), "use interleaved_1f1b");
}

TEST(PipelineSchedules, TraceIsChromeJson) {
  const ScheduleReport r = validate(make_schedule("1f1b", {2, 2, 1}));
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(r.events, "1f1b", 1000));
  int spans = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++spans;
    EXPECT_GE(e.at("dur").get<double>(), 1000.0);
  }
  EXPECT_EQ(spans, 8);
}

}  // namespace
}  // namespace braid::parallel::pipeline
