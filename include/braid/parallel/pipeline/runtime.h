// The pipeline runtime: executes one stage's action list of a schedule for one training step.
//
// Activations and gradients travel between stages over the pp group with shapes known in
// advance; receives are posted where the schedule says (ahead of use) and sends are
// asynchronous, so transfers overlap compute. Each micro-batch's stashed activations are
// released right after its backward. Collective over the pp group: every stage runs the same
// schedule in the same step.
//
// On a device (the stage's parameters there, `group` its device communicator) the buffers live
// on that device and nothing is read back: the losses are summed there. The transfers then
// follow matched_order (matched_order.h) instead of the schedule's early-posted receives, since
// a device communicator holds each send and receive until the peer issues its match.
#pragma once

#include <functional>

#include "braid/core/device.h"
#include "braid/dist/process_group.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/validate.h"

namespace braid::parallel::pipeline {

// What the runtime computes with; the Trainer binds it to the stage's part of the model.
struct StageCompute {
  // Forward of `microbatch` through this stage's model chunk `chunk`. `input` is the received
  // activation (a leaf that requires grad), undefined on the first virtual stage. Returns the
  // activation for the next virtual stage or, on the last, the micro-batch's mean loss.
  std::function<Tensor(int chunk, int microbatch, const Tensor& input)> forward;
  // Before every backward; `last` is true for this stage's final backward of the step (data
  // parallelism reduces gradients then).
  std::function<void(bool last)> before_backward;
};

struct StepResult {
  double loss_sum = 0;       // sum of the micro-batch losses (last stage; 0 elsewhere)
  Tensor device_loss_sum{};  // on a device: that sum there, a scalar (zero elsewhere)
};

class PipelineRuntime {
 public:
  // `stage` is this rank's coordinate on pp (its rank in `group`); `activation_shape` is the
  // shape of one micro-batch's activation between stages; `device` is where the stage's
  // parameters live (`group` must communicate tensors there).
  PipelineRuntime(Schedule schedule, int stage, dist::ProcessGroupPtr group, Shape activation_shape,
                  Device device = Device::cpu());

  // One training step: every action of this stage; the last virtual stage back-propagates
  // each micro-batch's loss times `loss_scale` (1 / micro-batches averages them). While a
  // trace records (braid/core/trace.h) every action is a span, with its receive's wait.
  StepResult train_step(const StageCompute& compute, float loss_scale);
  // The forward actions only (evaluation; no gradients are kept).
  StepResult forward_only(const StageCompute& compute);

  const Schedule& schedule() const { return schedule_; }

 private:
  StepResult run(const std::vector<Action>& actions, const StageCompute& compute, float loss_scale);
  int tag(ActionKind data, int microbatch, int receiving_virtual_stage) const;

  Schedule schedule_;
  int stage_;
  dist::ProcessGroupPtr group_;
  Shape activation_shape_;
  Device device_;
  // This stage's lists: the schedule's on the CPU, matched_order's on a device.
  std::vector<Action> train_actions_;
  std::vector<Action> forward_actions_;  // without backward work
};

}  // namespace braid::parallel::pipeline
