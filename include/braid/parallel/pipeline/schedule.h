// Pipeline schedules as data: for every stage, the ordered list of actions it performs in one
// training step (forward and backward of a micro-batch on one of its model chunks, and the
// sends and receives that connect the stages).
//
// With `chunks` = v virtual chunks per stage the model is cut into stages * v virtual stages;
// virtual stage k lives on stage k % stages as its chunk k / stages (Megatron's interleaved
// placement), so activations flow 0 -> 1 -> ... -> stages-1 -> 0 -> ... across the stages.
//
// Receives are posted asynchronously (the compute that needs the data waits for it), sends
// are asynchronous too; validate() proves a schedule cannot deadlock under those semantics.
// Adding a schedule is one file defining its generator and one line in schedule.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace braid::parallel::pipeline {

enum class ActionKind {
  forward,
  backward,
  recv_activation,
  send_activation,
  recv_gradient,
  send_gradient
};

struct Action {
  ActionKind kind;
  int microbatch = 0;
  int chunk = 0;  // this stage's model chunk, 0 .. chunks-1
  bool is_compute() const { return kind == ActionKind::forward || kind == ActionKind::backward; }
  bool operator==(const Action&) const = default;
  std::string str() const;  // "F3.1" (forward, micro-batch 3, chunk 1), "recv-act3.1", ...
};

struct ScheduleShape {
  int stages = 1;
  int microbatches = 1;
  int chunks = 1;  // virtual chunks per stage
  int virtual_stages() const { return stages * chunks; }
  int virtual_stage(int stage, int chunk) const { return chunk * stages + stage; }
  int stage_of(int virtual_stage) const { return virtual_stage % stages; }
  int chunk_of(int virtual_stage) const { return virtual_stage / stages; }
};

struct Schedule {
  std::string name;
  ScheduleShape shape;
  std::vector<std::vector<Action>> stages;  // stages[s]: stage s's actions in order
};

// A schedule's compute order: per stage, its forward and backward actions in order.
using ComputeOrder = std::vector<std::vector<Action>>;
using ScheduleGenerator = std::function<ComputeOrder(const ScheduleShape&)>;

// The schedule `name` for `shape`, with the communication inserted (each receive posted one
// compute action ahead of its use, so the transfer overlaps that compute). Throws a clear
// error for an unknown name or a shape the schedule cannot run (e.g. interleaving with fewer
// micro-batches than stages).
Schedule make_schedule(const std::string& name, const ScheduleShape& shape);
std::vector<std::string> schedule_names();

// The receive a compute action needs first (none on the ends of the virtual pipeline), and the
// send that passes its result on (none there either).
std::optional<Action> needed_receive(const Action& a, int stage, const ScheduleShape& shape);
std::optional<Action> resulting_send(const Action& a, int stage, const ScheduleShape& shape);

// The generators (one file each).
ComputeOrder gpipe(const ScheduleShape& shape);
ComputeOrder one_f_one_b(const ScheduleShape& shape);
ComputeOrder interleaved_one_f_one_b(const ScheduleShape& shape);

// The idle fraction of the stages that the schedule's family predicts with uniform compute
// costs: (stages - 1) / (chunks * microbatches + stages - 1).
double analytic_bubble_fraction(const ScheduleShape& shape);

}  // namespace braid::parallel::pipeline
