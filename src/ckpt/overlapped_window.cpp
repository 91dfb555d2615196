// OverlappedWindow: block copies spread over K steps and the exact host-side AdamW replay.
#include "braid/ckpt/overlapped_window.h"

#include "braid/autograd/grad_mode.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid::ckpt {

OverlappedWindow::OverlappedWindow(optim::Optimizer& optimizer, int blocks) : blocks_(blocks) {
  auto* adamw = dynamic_cast<optim::AdamW*>(&optimizer);
  BRAID_CHECK(adamw != nullptr,
              "overlapped checkpoints replay AdamW; this optimizer is not AdamW (use "
              "checkpoint.mode async)");
  BRAID_CHECK(blocks >= 1, "checkpoint.window must be >= 1, got {}", blocks);
  adamw_ = adamw->options();
  const auto& params = optimizer.params();
  // Greedy balance: each parameter joins the lightest block, largest parameters first.
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return params[a].param.numel() > params[b].param.numel(); });
  std::vector<int64_t> load(blocks, 0);
  block_of_.assign(params.size(), 0);
  for (size_t i : order) {
    const int lightest =
        static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    block_of_[i] = lightest;
    load[lightest] += params[i].param.numel();
  }
  for (const auto& p : params) weight_decay_.push_back(p.weight_decay);
  copies_.resize(params.size());
  copy_block(optimizer, 0);
}

void OverlappedWindow::copy_block(optim::Optimizer& optimizer, int block) {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < copies_.size(); ++i) {
    if (block_of_[i] != block) continue;
    ParamCopy& c = copies_[i];
    c.param = optimizer.params()[i].param.clone();
    const auto state = optimizer.param_state(i);  // AdamW: exp_avg, exp_avg_sq
    c.exp_avg = state.at(0).second.clone();
    c.exp_avg_sq = state.at(1).second.clone();
    c.steps = optimizer.param_steps(i);
    bytes_copied_ += 3 * static_cast<int64_t>(c.param.nbytes());
  }
  copied_ = block + 1;
}

void OverlappedWindow::before_update(const optim::Optimizer& optimizer, float lr, float grad_scale,
                                     bool skipped) {
  Update u{lr, grad_scale, skipped, copied_, std::vector<Tensor>(copies_.size())};
  if (!skipped) {
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (block_of_[i] >= copied_) continue;
      const Tensor g = optimizer.params()[i].param.grad();
      if (!g.defined()) continue;  // the live update leaves this parameter alone too
      u.grads[i] = g.contiguous().clone();
      bytes_copied_ += static_cast<int64_t>(g.nbytes());
    }
  }
  updates_.push_back(std::move(u));
}

bool OverlappedWindow::after_update(optim::Optimizer& optimizer) {
  if (copied_ < blocks_) copy_block(optimizer, copied_);
  if (copied_ < blocks_) return false;
  replay();
  return true;
}

void OverlappedWindow::replay() {
  autograd::NoGradGuard no_grad;
  const auto adamw = ops::kernel<ops::AdamWKernel>(Device::cpu());
  // Updates in the order they happened; each touches the blocks copied before it.
  for (const Update& u : updates_) {
    if (u.skipped) continue;
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (block_of_[i] >= u.first_block || !u.grads[i].defined()) continue;
      ParamCopy& c = copies_[i];
      const ops::AdamWHyper hyper{u.lr,       adamw_.beta1,     adamw_.beta2,
                                  adamw_.eps, weight_decay_[i], ++c.steps};
      adamw(c.param, u.grads[i], c.exp_avg, c.exp_avg_sq, hyper, u.grad_scale);
    }
  }
  updates_.clear();
}

}  // namespace braid::ckpt
