// OverlappedWindow: block copies spread over K steps and the exact host-side AdamW replay.
#include "braid/ckpt/overlapped_window.h"
#include "braid/core/trace.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>

#include "braid/autograd/grad_mode.h"
#include "braid/core/logging.h"
#include "braid/core/pinned_memory.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "device_copies.h"

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

// Greedy balance: each shard joins the lightest block, largest shards first.
std::vector<int> assign_blocks(const std::vector<optim::StateShard>& shards, int blocks) {
  std::vector<size_t> order(shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return shards[a].length > shards[b].length; });
  std::vector<int64_t> load(blocks, 0);
  std::vector<int> block_of(shards.size(), 0);
  for (size_t i : order) {
    const int lightest =
        static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    block_of[i] = lightest;
    load[lightest] += shards[i].length;
  }
  return block_of;
}

// Pieces of the staging buffer start on 64-byte boundaries (cache lines; DMA prefers them).
constexpr int64_t kStagingAlignment = 64;
int64_t staging_piece(int64_t bytes) {
  return (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}

// What the window copies of one shard: its values and both moments.
std::vector<Tensor> state_tensors(const optim::StateShard& s) {
  return {s.value, state_named(s, "exp_avg"), state_named(s, "exp_avg_sq")};
}

}  // namespace

OverlappedWindow::OverlappedWindow(const optim::AdamWOptions& adamw,
                                   const std::vector<optim::StateShard>& shards, int blocks,
                                   StoragePtr staging)
    : blocks_(blocks), adamw_(adamw) {
  BRAID_CHECK(blocks >= 1, "checkpoint.window must be >= 1, got {}", blocks);
  block_of_ = assign_blocks(shards, blocks);
  for (const auto& s : shards) {
    weight_decay_.push_back(s.weight_decay);
    steps_at_open_.push_back(s.steps);
  }
  copies_.resize(shards.size());
  std::vector<Tensor> state;
  for (const auto& s : shards)
    for (const Tensor& t : state_tensors(s)) state.push_back(t);
  device_ = device_of(state, "the overlapped checkpoint's state");
  if (!device_.is_cpu()) {
    const int64_t bytes = staging_bytes(shards, blocks);
    staging_ = staging && is_pinned(*staging) && static_cast<int64_t>(staging->bytes()) >= bytes
                   ? std::move(staging)
                   : pinned_storage(static_cast<size_t>(bytes), device_);
  }
  start_copy(shards, 0);
}

OverlappedWindow::~OverlappedWindow() {
  // The DMA may still be writing into the staging memory this window frees.
  for (const auto& copied : copies_in_flight_) {
    try {
      copied->synchronize();
    } catch (const std::exception& e) {
      log().error("an abandoned overlapped checkpoint copy failed: {}", e.what());
    }
  }
}

int64_t OverlappedWindow::staging_bytes(const std::vector<optim::StateShard>& shards, int blocks) {
  int64_t bytes = 2 * blocks * kStagingAlignment;  // each step's clip scale and skip flag
  for (int64_t size : copy_sizes(shards, blocks)) bytes += staging_piece(size);
  return bytes;
}

Tensor OverlappedWindow::take_staging(int64_t numel) {
  const int64_t bytes = numel * static_cast<int64_t>(sizeof(float));
  BRAID_CHECK(staged_ + staging_piece(bytes) <= static_cast<int64_t>(staging_->bytes()),
              "overlapped checkpoint window: its pinned buffer of {} bytes is full ({} used, "
              "{} more asked for); the owned state changed while the window was open?",
              staging_->bytes(), staged_, bytes);
  Tensor t = Tensor::from_storage(staging_, {numel}, DType::f32,
                                  staged_ / static_cast<int64_t>(sizeof(float)));
  staged_ += staging_piece(bytes);
  return t;
}

std::vector<int64_t> OverlappedWindow::copy_sizes(const std::vector<optim::StateShard>& shards,
                                                  int blocks) {
  const std::vector<int> block_of = assign_blocks(shards, blocks);
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < shards.size(); ++i) {
    const int copies = 3 + (blocks - 1 - block_of[i]);
    sizes.insert(sizes.end(), copies, static_cast<int64_t>(shards[i].value.nbytes()));
  }
  return sizes;
}

void OverlappedWindow::start_copy(const std::vector<optim::StateShard>& shards, int block) {
  copied_ = block + 1;  // counted now: every reader of it waits for the copier first
  if (!device_.is_cpu()) {
    // A DMA beside the next forward and backward; the next update waits for it on the device.
    copy_block_off_device(shards, block, /*compute_waits=*/false);
    return;
  }
  copier_.start([this, shards, block] {
    // One thread: the training threads keep both cores; a second OpenMP team here would fight
    // them for the same cores.
    omp_set_num_threads(1);
    pthread_setname_np(pthread_self(), "braid-ckpt-copy");
    trace::name_this_thread("checkpoint copy");
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
  trace::Span span("checkpoint");
  if (span.active()) span.name(fmt::format("copy block {}", block)).arg({"block", block});
  const int64_t bytes_before = bytes_copied_;
  check_same(shards);
  autograd::NoGradGuard no_grad;
  std::vector<size_t> members;
  std::vector<Tensor> sources;  // value, exp_avg, exp_avg_sq of each member
  for (size_t i = 0; i < copies_.size(); ++i) {
    if (block_of_[i] != block) continue;
    const optim::StateShard& s = shards[i];
    members.push_back(i);
    sources.insert(sources.end(),
                   {s.value, state_named(s, "exp_avg"), state_named(s, "exp_avg_sq")});
  }
  const std::vector<Tensor> copies = clone_all(sources);
  for (size_t k = 0; k < members.size(); ++k) {
    ShardCopy& c = copies_[members[k]];
    c.value = copies[3 * k];
    c.exp_avg = copies[3 * k + 1];
    c.exp_avg_sq = copies[3 * k + 2];
    bytes_copied_ += 3 * static_cast<int64_t>(c.value.nbytes());
  }
  if (span.active()) span.arg({"bytes", bytes_copied_ - bytes_before});
}

void OverlappedWindow::copy_block_off_device(const std::vector<optim::StateShard>& shards,
                                             int block, bool compute_waits) {
  // The host's part: issuing the DMA on the copy stream, which then runs beside the compute.
  trace::Span span("checkpoint");
  if (span.active())
    span.name(fmt::format("copy block {} (DMA issue)", block)).arg({"block", block});
  check_same(shards);
  autograd::NoGradGuard no_grad;
  std::vector<DeviceToHost> dma;
  for (size_t i = 0; i < copies_.size(); ++i) {
    if (block_of_[i] != block) continue;
    ShardCopy& c = copies_[i];
    Tensor* targets[] = {&c.value, &c.exp_avg, &c.exp_avg_sq};
    const std::vector<Tensor> sources = state_tensors(shards[i]);
    for (int k = 0; k < 3; ++k) {
      *targets[k] = take_staging(sources[k].numel());
      dma.push_back({targets[k]->data_ptr(), sources[k].contiguous()});
      bytes_copied_ += static_cast<int64_t>(sources[k].nbytes());
    }
  }
  block_copied_ = copy_to_host(device_, dma, compute_waits);
  copies_in_flight_.push_back(block_copied_);
}

void OverlappedWindow::before_update(const std::vector<optim::StateShard>& shards, float lr,
                                     const Tensor& grad_scale, const Tensor& skipped) {
  BRAID_CHECK(grad_scale.numel() == 1 && skipped.numel() == 1 && grad_scale.dtype() == DType::f32 &&
                  skipped.dtype() == DType::f32,
              "overlapped checkpoint window: the clip scale and skip flag must be f32 tensors "
              "of one element, got {} and {}",
              grad_scale.str(), skipped.str());
  if (device_.is_cpu() || (grad_scale.device().is_cpu() && skipped.device().is_cpu())) {
    before_update(shards, lr, grad_scale.item(), skipped.item() != 0.0f);
    return;
  }
  BRAID_CHECK(grad_scale.device() == device_ && skipped.device() == device_,
              "overlapped checkpoint window: the clip scale ({}) and skip flag ({}) must be on "
              "the state's device, {}",
              grad_scale.device().str(), skipped.device().str(), device_.str());
  Stream::compute(device_).wait(*block_copied_);  // the update is about to change the block
  check_same(shards);
  record_update(shards, Update{lr, 1.0f, false, nullptr, nullptr, copied_, {}, {}}, grad_scale,
                skipped);
}

void OverlappedWindow::record_update(const std::vector<optim::StateShard>& shards, Update u,
                                     const Tensor& grad_scale, const Tensor& skipped) {
  autograd::NoGradGuard no_grad;
  u.grads.resize(copies_.size());
  for (const optim::StateShard& s : shards) u.had_grad.push_back(s.grad.defined());
  std::vector<DeviceToHost> dma;
  if (grad_scale.defined()) {
    // Whether the step is skipped is known only on the device: the gradients are copied in
    // any case, and the replay reads the flag.
    Tensor scale = take_staging(1), skip = take_staging(1);
    dma.push_back({scale.data_ptr(), grad_scale.contiguous()});
    dma.push_back({skip.data_ptr(), skipped.contiguous()});
    u.grad_scale_copy = scale.data<float>();
    u.skipped_copy = skip.data<float>();
  }
  if (!u.skipped) {
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (block_of_[i] >= copied_) continue;
      const Tensor& g = shards[i].grad;
      if (!g.defined()) continue;  // the live update leaves this shard alone too
      u.grads[i] = take_staging(g.numel());
      dma.push_back({u.grads[i].data_ptr(), g.contiguous()});
      bytes_copied_ += static_cast<int64_t>(g.nbytes());
    }
  }
  if (!dma.empty()) {
    grads_copied_ = copy_to_host(device_, dma, /*compute_waits=*/false);
    copies_in_flight_.push_back(grads_copied_);
  }
  updates_.push_back(std::move(u));
}

void OverlappedWindow::before_update(const std::vector<optim::StateShard>& shards, float lr,
                                     float grad_scale, bool skipped) {
  if (!device_.is_cpu()) {
    Stream::compute(device_).wait(*block_copied_);  // the update is about to change the block
    check_same(shards);
    record_update(shards, Update{lr, grad_scale, skipped, nullptr, nullptr, copied_, {}, {}}, {},
                  {});
    return;
  }
  copier_.wait();
  check_same(shards);
  Update u{lr, grad_scale, skipped, nullptr, nullptr, copied_, std::vector<Tensor>(copies_.size()),
           {}};
  for (const optim::StateShard& s : shards) u.had_grad.push_back(s.grad.defined());
  if (!skipped) {
    std::vector<size_t> recorded;
    std::vector<Tensor> grads;
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (block_of_[i] >= copied_) continue;
      const Tensor& g = shards[i].grad;
      if (!g.defined()) continue;  // the live update leaves this shard alone too
      recorded.push_back(i);
      grads.push_back(g);
      bytes_copied_ += static_cast<int64_t>(g.nbytes());
    }
    std::vector<Tensor> copies = clone_all(grads);  // the training threads wait: use them all
    for (size_t k = 0; k < recorded.size(); ++k) u.grads[recorded[k]] = std::move(copies[k]);
  }
  updates_.push_back(std::move(u));
}

bool OverlappedWindow::after_update(const std::vector<optim::StateShard>& shards) {
  if (!device_.is_cpu()) {
    // Issued after the update: the next backward, which overwrites the gradients, waits.
    if (grads_copied_) Stream::compute(device_).wait(*grads_copied_);
    grads_copied_.reset();
    if (copied_ + 1 < blocks_) {
      start_copy(shards, copied_);
      return false;
    }
    if (copied_ < blocks_) {
      // The next update, which changes this block, has no call before it that could order it.
      copy_block_off_device(shards, copied_, /*compute_waits=*/true);
      copied_ = blocks_;
    }
    return true;
  }
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
  trace::Span span("checkpoint", "replay");
  if (span.active()) span.arg({"updates", static_cast<int64_t>(updates_.size())});
  BRAID_CHECK(copied_ == blocks_ && !copier_.running(),
              "overlapped checkpoint window finished before its last block was copied");
  autograd::NoGradGuard no_grad;
  // Device state: every DMA into the staging memory has landed before it is read.
  for (const auto& copied : copies_in_flight_) copied->synchronize();
  for (Update& u : updates_) {
    if (u.grad_scale_copy != nullptr) u.grad_scale = *u.grad_scale_copy;
    if (u.skipped_copy != nullptr) u.skipped = *u.skipped_copy != 0.0f;
  }
  for (size_t i = 0; i < copies_.size(); ++i) {
    // The updates before this copy that ran on it are in its bits; count them.
    int64_t applied = 0;
    for (const Update& u : updates_)
      if (u.first_block <= block_of_[i] && !u.skipped && u.had_grad[i]) ++applied;
    copies_[i].steps = steps_at_open_[i] + applied;
    replay(i);
  }
  updates_.clear();
  finished_ = true;
}

void OverlappedWindow::replay(size_t shard) {
  // The updates this shard's copy missed, in the order they happened.
  std::vector<const Update*> missed;
  for (const Update& u : updates_)
    if (!u.skipped && block_of_[shard] < u.first_block && u.grads[shard].defined())
      missed.push_back(&u);
  if (missed.empty()) return;
  const auto adamw = ops::kernel<ops::AdamWKernel>(Device::cpu());
  ShardCopy& c = copies_[shard];
  // Tile by tile, every missed update on the tile before the next one: the tile stays in the
  // cache, so the state is read and written once rather than once per update (a third of
  // the memory traffic for the 3 updates a block misses on average in a window of 7). AdamW
  // is elementwise, so this is bitwise the same as whole passes in update order; tiles stay
  // below the kernel's threading threshold, so each runs on this one thread.
  constexpr int64_t kTile = 16384;  // 64 KiB per stream: p, m, v and the missed gradients fit L2
  const int64_t n = c.value.numel();
  for (int64_t begin = 0; begin < n; begin += kTile) {
    const int64_t length = std::min(kTile, n - begin);
    Tensor value = c.value.narrow(0, begin, length);
    Tensor exp_avg = c.exp_avg.narrow(0, begin, length);
    Tensor exp_avg_sq = c.exp_avg_sq.narrow(0, begin, length);
    int64_t step = c.steps;
    for (const Update* u : missed) {
      const ops::AdamWHyper hyper{u->lr,      adamw_.beta1,         adamw_.beta2,
                                  adamw_.eps, weight_decay_[shard], ++step};
      adamw(value, u->grads[shard].narrow(0, begin, length), exp_avg, exp_avg_sq, hyper,
            u->grad_scale);
    }
  }
  c.steps += static_cast<int64_t>(missed.size());
}

}  // namespace braid::ckpt
