// OverlappedWindow: block copies spread over K steps and the exact host-side AdamW replay.
#include "braid/ckpt/overlapped_window.h"

#include <omp.h>

#include <algorithm>

#include "braid/autograd/grad_mode.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"

namespace braid::ckpt {
namespace {

// The AdamW moments of a shard, by name (the order of param_state is not relied on).
const Tensor& state_named(const optim::StateShard& shard, const std::string& name) {
  for (const auto& [state, t] : shard.state)
    if (state == name) return t;
  BRAID_FAIL(
      "overlapped checkpoints replay AdamW, but parameter '{}' has no '{}' state (is the "
      "optimizer AdamW? use checkpoint.mode async otherwise)",
      shard.name, name);
}

}  // namespace

OverlappedWindow::OverlappedWindow(const optim::AdamWOptions& adamw,
                                   const std::vector<optim::StateShard>& shards, int blocks)
    : blocks_(blocks), adamw_(adamw) {
  BRAID_CHECK(blocks >= 1, "checkpoint.window must be >= 1, got {}", blocks);
  // Greedy balance: each shard joins the lightest block, largest shards first.
  std::vector<size_t> order(shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return shards[a].length > shards[b].length; });
  std::vector<int64_t> load(blocks, 0);
  block_of_.assign(shards.size(), 0);
  for (size_t i : order) {
    const int lightest =
        static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    block_of_[i] = lightest;
    load[lightest] += shards[i].length;
  }
  for (const auto& s : shards) weight_decay_.push_back(s.weight_decay);
  copies_.resize(shards.size());
  start_copy(shards, 0);
}

void OverlappedWindow::start_copy(const std::vector<optim::StateShard>& shards, int block) {
  copied_ = block + 1;  // counted now: every reader of it waits for the copier first
  copier_.start([this, shards, block] {
    // One thread: the training threads keep both cores; a second OpenMP team here would fight
    // them for the same cores.
    omp_set_num_threads(1);
    copy_block(shards, block);
  });
}

void OverlappedWindow::check_same(const std::vector<optim::StateShard>& shards) const {
  BRAID_CHECK(shards.size() == copies_.size(),
              "overlapped checkpoint window: {} shards now, {} when it opened (the owned state "
              "must not change while a window is open)",
              shards.size(), copies_.size());
}

void OverlappedWindow::copy_block(const std::vector<optim::StateShard>& shards, int block) {
  check_same(shards);
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < copies_.size(); ++i) {
    if (block_of_[i] != block) continue;
    const optim::StateShard& s = shards[i];
    ShardCopy& c = copies_[i];
    c.value = s.value.clone();
    c.exp_avg = state_named(s, "exp_avg").clone();
    c.exp_avg_sq = state_named(s, "exp_avg_sq").clone();
    c.steps = s.steps;
    bytes_copied_ += 3 * static_cast<int64_t>(c.value.nbytes());
  }
}

void OverlappedWindow::before_update(const std::vector<optim::StateShard>& shards, float lr,
                                     float grad_scale, bool skipped) {
  copier_.wait();
  check_same(shards);
  Update u{lr, grad_scale, skipped, copied_, std::vector<Tensor>(copies_.size())};
  if (!skipped) {
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (block_of_[i] >= copied_) continue;
      const Tensor& g = shards[i].grad;
      if (!g.defined()) continue;  // the live update leaves this shard alone too
      u.grads[i] = g.clone();
      bytes_copied_ += static_cast<int64_t>(g.nbytes());
    }
  }
  updates_.push_back(std::move(u));
}

bool OverlappedWindow::after_update(const std::vector<optim::StateShard>& shards) {
  copier_.wait();
  if (copied_ + 1 < blocks_) {
    start_copy(shards, copied_);
    return false;
  }
  // The last block is the state after this very update, which the next update changes: it
  // is copied here, since no later call would wait for a helper.
  if (copied_ < blocks_) {
    check_same(shards);
    copy_block(shards, copied_);
    copied_ = blocks_;
  }
  return true;
}

void OverlappedWindow::finish() {
  BRAID_CHECK(copied_ == blocks_ && !copier_.running(),
              "overlapped checkpoint window finished before its last block was copied");
  autograd::NoGradGuard no_grad;
  const auto adamw = ops::kernel<ops::AdamWKernel>(Device::cpu());
  // Updates in the order they happened; each touches the blocks copied before it.
  for (const Update& u : updates_) {
    if (u.skipped) continue;
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (block_of_[i] >= u.first_block || !u.grads[i].defined()) continue;
      ShardCopy& c = copies_[i];
      const ops::AdamWHyper hyper{u.lr,       adamw_.beta1,     adamw_.beta2,
                                  adamw_.eps, weight_decay_[i], ++c.steps};
      adamw(c.value, u.grads[i], c.exp_avg, c.exp_avg_sq, hyper, u.grad_scale);
    }
  }
  updates_.clear();
  finished_ = true;
}

}  // namespace braid::ckpt
