// The schedule factory: names -> generators, and the communication every schedule shares.
#include "braid/parallel/pipeline/schedule.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "braid/core/error.h"

namespace braid::parallel::pipeline {
namespace {

const std::map<std::string, ScheduleGenerator>& generators() {
  static const std::map<std::string, ScheduleGenerator> table = {
      {"gpipe", gpipe},
      {"1f1b", one_f_one_b},
      {"interleaved_1f1b", interleaved_one_f_one_b},
  };
  return table;
}

}  // namespace

std::optional<Action> needed_receive(const Action& a, int stage, const ScheduleShape& shape) {
  const int k = shape.virtual_stage(stage, a.chunk);
  if (a.kind == ActionKind::forward && k > 0)
    return Action{ActionKind::recv_activation, a.microbatch, a.chunk};
  if (a.kind == ActionKind::backward && k < shape.virtual_stages() - 1)
    return Action{ActionKind::recv_gradient, a.microbatch, a.chunk};
  return std::nullopt;
}

std::optional<Action> resulting_send(const Action& a, int stage, const ScheduleShape& shape) {
  const int k = shape.virtual_stage(stage, a.chunk);
  if (a.kind == ActionKind::forward && k < shape.virtual_stages() - 1)
    return Action{ActionKind::send_activation, a.microbatch, a.chunk};
  if (a.kind == ActionKind::backward && k > 0)
    return Action{ActionKind::send_gradient, a.microbatch, a.chunk};
  return std::nullopt;
}

std::string Action::str() const {
  const char* names[] = {"F", "B", "recv-act", "send-act", "recv-grad", "send-grad"};
  return fmt::format("{}{}.{}", names[static_cast<int>(kind)], microbatch, chunk);
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto& [name, gen] : generators()) out.push_back(name);
  return out;
}

Schedule make_schedule(const std::string& name, const ScheduleShape& shape) {
  auto it = generators().find(name);
  BRAID_CHECK(it != generators().end(), "unknown pipeline schedule '{}' (known: {})", name,
              fmt::join(schedule_names(), ", "));
  BRAID_CHECK(shape.stages >= 1 && shape.microbatches >= 1 && shape.chunks >= 1,
              "pipeline schedule needs stages, micro-batches and chunks >= 1; got {}, {}, {}",
              shape.stages, shape.microbatches, shape.chunks);
  const ComputeOrder order = it->second(shape);
  Schedule schedule{name, shape, {}};
  for (int s = 0; s < shape.stages; ++s) {
    const std::vector<Action>& compute = order.at(s);
    std::vector<Action>& out = schedule.stages.emplace_back();
    // Each receive is posted one compute action ahead, so its transfer overlaps that compute.
    for (size_t i = 0; i < compute.size(); ++i) {
      if (i == 0)
        if (auto r = needed_receive(compute[0], s, shape)) out.push_back(*r);
      if (i + 1 < compute.size())
        if (auto r = needed_receive(compute[i + 1], s, shape)) out.push_back(*r);
      out.push_back(compute[i]);
      if (auto send = resulting_send(compute[i], s, shape)) out.push_back(*send);
    }
  }
  return schedule;
}

double analytic_bubble_fraction(const ScheduleShape& shape) {
  const double p = shape.stages;
  return (p - 1) / (static_cast<double>(shape.chunks) * shape.microbatches + p - 1);
}

}  // namespace braid::parallel::pipeline
