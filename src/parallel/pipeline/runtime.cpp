// PipelineRuntime: one stage's actions, with posted receives, asynchronous sends and stashed
// activations released after their backward.
#include "braid/parallel/pipeline/runtime.h"

#include <map>

#include "braid/autograd/grad_mode.h"
#include "braid/core/error.h"
#include "braid/core/trace.h"
#include "braid/ops/elementwise.h"
#include "braid/parallel/pipeline/matched_order.h"

namespace braid::parallel::pipeline {
namespace {

struct Posted {
  Tensor buffer;
  dist::WorkPtr work;
};

const char* kind_name(ActionKind kind) {
  const char* names[] = {"forward",         "backward",      "recv_activation",
                         "send_activation", "recv_gradient", "send_gradient"};
  return names[static_cast<int>(kind)];
}

// What a micro-batch chunk keeps between its forward and its backward.
struct Stash {
  Tensor input, output, input_grad;
};

}  // namespace

PipelineRuntime::PipelineRuntime(Schedule schedule, int stage, dist::ProcessGroupPtr group,
                                 Shape activation_shape, Device device)
    : schedule_(std::move(schedule)),
      stage_(stage),
      group_(std::move(group)),
      activation_shape_(std::move(activation_shape)),
      device_(device) {
  BRAID_CHECK(group_ && group_->size() == schedule_.shape.stages && group_->rank() == stage_,
              "pipeline stage {} of {} needs the pp group's rank {} of {}", stage_,
              schedule_.shape.stages, group_ ? group_->rank() : -1, group_ ? group_->size() : 0);
  if (device_.is_cpu()) {
    train_actions_ = schedule_.stages.at(stage_);
    for (const Action& a : train_actions_)
      if (a.kind == ActionKind::forward || a.kind == ActionKind::recv_activation ||
          a.kind == ActionKind::send_activation)
        forward_actions_.push_back(a);
    return;
  }
  // Every stage derives the same global order from the same schedule (matched_order.h).
  ComputeOrder train, forward;
  for (const std::vector<Action>& actions : schedule_.stages) {
    train.push_back(compute_actions(actions, true));
    forward.push_back(compute_actions(actions, false));
  }
  train_actions_ = matched_order(train, schedule_.shape).at(stage_);
  forward_actions_ = matched_order(forward, schedule_.shape).at(stage_);
}

int PipelineRuntime::tag(ActionKind data, int microbatch, int receiving_virtual_stage) const {
  const int grad = data == ActionKind::recv_gradient || data == ActionKind::send_gradient;
  return (receiving_virtual_stage * schedule_.shape.microbatches + microbatch) * 2 + grad;
}

StepResult PipelineRuntime::train_step(const StageCompute& compute, float loss_scale) {
  return run(train_actions_, compute, loss_scale);
}

StepResult PipelineRuntime::forward_only(const StageCompute& compute) {
  autograd::NoGradGuard no_grad;
  return run(forward_actions_, compute, 0.0f);
}

StepResult PipelineRuntime::run(const std::vector<Action>& actions, const StageCompute& compute,
                                float loss_scale) {
  const ScheduleShape& shape = schedule_.shape;
  const int last_virtual = shape.virtual_stages() - 1;
  std::map<std::pair<int, int>, Posted> activations, gradients;  // (microbatch, chunk)
  std::map<std::pair<int, int>, Stash> stash;
  std::vector<std::pair<Tensor, dist::WorkPtr>> sends;
  StepResult result;
  // A fresh sum of its own (the caller reduces it in place); 0 + x is exact.
  if (!device_.is_cpu()) result.device_loss_sum = Tensor::zeros({}, DType::f32, device_);
  size_t backwards_left = 0;
  for (const Action& a : actions) backwards_left += a.kind == ActionKind::backward;
  const bool training = backwards_left > 0;

  for (const Action& a : actions) {
    const int k = shape.virtual_stage(stage_, a.chunk);
    const std::pair<int, int> id{a.microbatch, a.chunk};
    // Every action on this thread's trace track; a receive's wait is a span of its own.
    trace::Span span("pipeline");
    if (span.active())
      span.name(a.str())
          .arg({"action", kind_name(a.kind)})
          .arg({"microbatch", a.microbatch})
          .arg({"chunk", a.chunk})
          .arg({"stage", stage_});
    auto wait_for = [&](Posted& posted) {
      trace::Span waiting("pipeline_wait");
      if (waiting.active()) waiting.name("wait " + a.str());
      posted.work->wait();
    };
    switch (a.kind) {
      case ActionKind::recv_activation:
      case ActionKind::recv_gradient: {
        const bool act = a.kind == ActionKind::recv_activation;
        Posted posted{Tensor::empty(activation_shape_, DType::f32, device_), nullptr};
        const int from = act ? shape.stage_of(k - 1) : shape.stage_of(k + 1);
        posted.work = group_->recv(posted.buffer, from, tag(a.kind, a.microbatch, k));
        (act ? activations : gradients)[id] = std::move(posted);
        break;
      }
      case ActionKind::send_activation:
      case ActionKind::send_gradient: {
        const bool act = a.kind == ActionKind::send_activation;
        Stash& s = stash.at(id);
        Tensor payload = act ? s.output.detach().contiguous() : s.input_grad.contiguous();
        const int to_virtual = act ? k + 1 : k - 1;
        sends.emplace_back(payload, group_->send(payload, shape.stage_of(to_virtual),
                                                 tag(a.kind, a.microbatch, to_virtual)));
        if (!act) stash.erase(id);  // the backward's last use of this micro-batch chunk
        break;
      }
      case ActionKind::forward: {
        Stash s;
        if (k > 0) {
          Posted posted = std::move(activations.at(id));
          activations.erase(id);
          wait_for(posted);
          s.input = posted.buffer;
          if (autograd::GradMode::is_enabled()) s.input.set_requires_grad(true);
        }
        s.output = compute.forward(a.chunk, a.microbatch, s.input);
        if (k == last_virtual) {
          if (device_.is_cpu())
            result.loss_sum += s.output.item();
          else  // summed on the device: reading it would wait for the device
            result.device_loss_sum = add(result.device_loss_sum, s.output.detach());
        }
        if (k != last_virtual || autograd::GradMode::is_enabled()) stash[id] = std::move(s);
        break;
      }
      case ActionKind::backward: {
        Stash& s = stash.at(id);
        Tensor upstream;
        if (k < last_virtual) {
          Posted posted = std::move(gradients.at(id));
          gradients.erase(id);
          wait_for(posted);
          upstream = posted.buffer;
        } else {
          upstream = Tensor::full({}, loss_scale, DType::f32, device_);
        }
        if (compute.before_backward) compute.before_backward(--backwards_left == 0);
        s.output.backward(upstream);
        s.output = Tensor();
        if (k > 0) {
          s.input_grad = s.input.grad();
          BRAID_CHECK(s.input_grad.defined(),
                      "pipeline stage {}: no gradient reached the input of {}", stage_, a.str());
          s.input = Tensor();
        } else {
          stash.erase(id);
        }
        break;
      }
    }
  }
  {
    trace::Span span("pipeline_wait", "wait sends");
    for (auto& [tensor, work] : sends) work->wait();
  }
  if (training)
    BRAID_CHECK(stash.empty(),
                "pipeline stage {}: {} micro-batch chunks were never back-propagated", stage_,
                stash.size());
  return result;
}

}  // namespace braid::parallel::pipeline
