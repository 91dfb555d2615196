// The schedule validator: an event-driven simulation of every stage's list.
#include "braid/parallel/pipeline/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "braid/core/error.h"

namespace braid::parallel::pipeline {
namespace {

// A message on the wire: what it carries, for which virtual stage it is meant.
using MessageKey = std::tuple<ActionKind, int /*microbatch*/, int /*virtual stage receiving*/>;

struct StageState {
  size_t next = 0;
  double clock = 0;
  std::set<std::pair<int, int>> forwarded, backwarded;  // (microbatch, chunk)
  std::set<MessageKey> posted;                          // receives posted, not yet consumed
  int held = 0;
};

}  // namespace

ScheduleReport validate(const Schedule& schedule, const ActionCosts& costs) {
  const ScheduleShape& shape = schedule.shape;
  const int p = shape.stages, last_virtual = shape.virtual_stages() - 1;
  BRAID_CHECK(static_cast<int>(schedule.stages.size()) == p,
              "schedule '{}' has {} stage lists for {} stages", schedule.name,
              schedule.stages.size(), p);
  std::vector<StageState> st(p);
  std::map<MessageKey, double> sent;  // arrival time of each sent message
  std::set<MessageKey> received;
  ScheduleReport report;
  report.peak_activations.assign(p, 0);
  auto where = [&](int s, const Action& a) {
    return fmt::format("schedule '{}' ({} stages, {} micro-batches, {} chunks): stage {} {}",
                       schedule.name, p, shape.microbatches, shape.chunks, s, a.str());
  };

  // Tries to run stage s's next action; false when it must wait for data.
  auto step = [&](int s) -> bool {
    StageState& me = st[s];
    const Action& a = schedule.stages[s][me.next];
    const int k = shape.virtual_stage(s, a.chunk);
    BRAID_CHECK(a.microbatch >= 0 && a.microbatch < shape.microbatches && a.chunk >= 0 &&
                    a.chunk < shape.chunks,
                "{}: micro-batch or chunk out of range", where(s, a));
    const std::pair<int, int> id{a.microbatch, a.chunk};
    switch (a.kind) {
      case ActionKind::recv_activation:
      case ActionKind::recv_gradient: {
        const MessageKey key{a.kind, a.microbatch, k};
        BRAID_CHECK(me.posted.insert(key).second && !received.count(key), "{}: received twice",
                    where(s, a));
        break;
      }
      case ActionKind::send_activation:
      case ActionKind::send_gradient: {
        const bool act = a.kind == ActionKind::send_activation;
        BRAID_CHECK(act ? me.forwarded.count(id) : me.backwarded.count(id),
                    "{}: sends a result it has not computed", where(s, a));
        BRAID_CHECK(act ? k < last_virtual : k > 0, "{}: nobody is there to receive it",
                    where(s, a));
        const MessageKey key{act ? ActionKind::recv_activation : ActionKind::recv_gradient,
                             a.microbatch, act ? k + 1 : k - 1};
        BRAID_CHECK(sent.emplace(key, me.clock + costs.comm).second, "{}: sent twice", where(s, a));
        break;
      }
      case ActionKind::forward:
      case ActionKind::backward: {
        const bool fwd = a.kind == ActionKind::forward;
        BRAID_CHECK(fwd ? !me.forwarded.count(id) : !me.backwarded.count(id), "{}: runs twice",
                    where(s, a));
        if (!fwd)
          BRAID_CHECK(me.forwarded.count(id), "{}: backward before its forward", where(s, a));
        double ready = me.clock;
        const bool needs_input = fwd ? k > 0 : k < last_virtual;
        if (needs_input) {
          const MessageKey key{fwd ? ActionKind::recv_activation : ActionKind::recv_gradient,
                               a.microbatch, k};
          BRAID_CHECK(me.posted.count(key), "{}: needs data whose receive was never posted",
                      where(s, a));
          auto arrived = sent.find(key);
          if (arrived == sent.end()) return false;  // not sent yet: wait
          ready = std::max(ready, arrived->second);
          me.posted.erase(key);
          received.insert(key);
        }
        const double cost = fwd ? costs.forward : costs.backward;
        report.events.push_back({s, a, ready, cost});
        me.clock = ready + cost;
        (fwd ? me.forwarded : me.backwarded).insert(id);
        me.held += fwd ? 1 : -1;
        report.peak_activations[s] = std::max(report.peak_activations[s], me.held);
        break;
      }
    }
    ++me.next;
    return true;
  };

  for (;;) {
    bool progressed = false, done = true;
    for (int s = 0; s < p; ++s) {
      while (st[s].next < schedule.stages[s].size() && step(s)) progressed = true;
      done = done && st[s].next == schedule.stages[s].size();
    }
    if (done) break;
    if (!progressed) {
      std::string blocked;
      for (int s = 0; s < p; ++s)
        if (st[s].next < schedule.stages[s].size())
          blocked += fmt::format("{}stage {} waits at {}", blocked.empty() ? "" : ", ", s,
                                 schedule.stages[s][st[s].next].str());
      BRAID_FAIL("schedule '{}' ({} stages, {} micro-batches, {} chunks) deadlocks: {}",
                 schedule.name, p, shape.microbatches, shape.chunks, blocked);
    }
  }
  double busy = 0;
  for (int s = 0; s < p; ++s) {
    const size_t expected = static_cast<size_t>(shape.microbatches) * shape.chunks;
    BRAID_CHECK(st[s].forwarded.size() == expected && st[s].backwarded.size() == expected,
                "schedule '{}': stage {} runs {} forwards and {} backwards; {} of each expected",
                schedule.name, s, st[s].forwarded.size(), st[s].backwarded.size(), expected);
    BRAID_CHECK(st[s].posted.empty(), "schedule '{}': stage {} posted a receive nobody sends",
                schedule.name, s);
    report.makespan = std::max(report.makespan, st[s].clock);
    busy += static_cast<double>(expected) * (costs.forward + costs.backward);
  }
  BRAID_CHECK(received.size() == sent.size(), "schedule '{}': a send is never received",
              schedule.name);
  report.bubble_fraction = 1.0 - busy / (report.makespan * p);
  report.analytic_bubble_fraction = analytic_bubble_fraction(shape);
  return report;
}

}  // namespace braid::parallel::pipeline
