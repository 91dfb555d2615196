// DataParallel: flat buffers, buckets launched from grad-ready hooks, ZeRO-1 sharded AdamW.
#include "braid/parallel/data_parallel.h"

#include <cmath>

#include "braid/autograd/grad_mode.h"
#include "braid/core/logging.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/reduce.h"

namespace braid::parallel {

DataParallelOptions DataParallelOptions::parse(const StrategyOptions& options, bool zero1) {
  OptionReader reader(options, zero1 ? "zero1" : "ddp");
  DataParallelOptions o;
  o.bucket_mb = reader.number("bucket_mb", o.bucket_mb);
  o.zero1 = zero1;
  reader.finish();
  BRAID_CHECK(o.bucket_mb > 0, "bucket_mb must be > 0, got {}", o.bucket_mb);
  return o;
}

int64_t DataParallel::chunk_begin(const Bucket& b) const {
  return b.begin + dist::chunk_offset(b.end - b.begin, group_->size(), group_->rank());
}

int64_t DataParallel::chunk_length(const Bucket& b) const {
  return dist::chunk_size(b.end - b.begin, group_->size(), group_->rank());
}

void DataParallel::setup(nn::Module& model, optim::Optimizer& optimizer,
                         const dist::ParallelGrid& grid) {
  Strategy::setup(model, optimizer, grid);
  autograd::NoGradGuard no_grad;
  const std::map<std::string, nn::ShardSpec> shards = model.shard_specs();
  BRAID_CHECK(!optimizer.params().empty(), "data parallel needs parameters to synchronise");
  device_ = optimizer.params().front().param.device();
  for (const auto& entry : optimizer.params()) {
    auto shard = shards.find(entry.name);
    tp_sharded_.push_back(shard != shards.end() && !shard->second.is_whole());
    const SharedParameter* copy = find_shared(shared_, entry.param);
    counted_.push_back(!copy || copy->counted);
    BRAID_CHECK(entry.param.dtype() == DType::f32,
                "data parallel handles f32 parameters; '{}' is {}", entry.name, entry.param.str());
    BRAID_CHECK(entry.param.device() == device_,
                "data parallel needs every parameter on one device: '{}' is on {}, '{}' on {}",
                entry.name, entry.param.device().str(), optimizer.params().front().name,
                device_.str());
    params_.push_back(entry.param);
    weight_decay_.push_back(entry.weight_decay);
  }
  group_ = grid.group_for("dp", device_);
  host_group_ = grid.group("dp");
  if (options_.zero1)
    BRAID_CHECK(dynamic_cast<optim::AdamW*>(&optimizer) != nullptr,
                "zero1 shards AdamW's state; the optimizer here is not AdamW (use strategy ddp)");

  // Flat layout in reverse registration order: the first buckets hold the last layers,
  // whose gradients are ready first.
  int64_t total = 0;
  param_offset_.assign(params_.size(), 0);
  for (size_t k = params_.size(); k-- > 0;) {
    param_offset_[k] = total;
    total += params_[k].numel();
  }
  flat_grads_ = Tensor::zeros({total}, DType::f32, device_);
  flat_params_ = Tensor::zeros({total}, DType::f32, device_);
  const int64_t bucket_elems =
      std::max<int64_t>(1, static_cast<int64_t>(options_.bucket_mb * (1 << 20) / sizeof(float)));
  bucket_of_.assign(params_.size(), 0);
  for (size_t k = params_.size(); k-- > 0;) {
    Tensor& p = params_[k];
    if (buckets_.empty() || buckets_.back().end - buckets_.back().begin >= bucket_elems) {
      Bucket fresh;
      fresh.begin = fresh.end = param_offset_[k];
      buckets_.push_back(fresh);
    }
    Bucket& b = buckets_.back();
    b.end = param_offset_[k] + p.numel();
    ++b.params;
    b.holds_shared = b.holds_shared || is_shared(p);
    bucket_of_[k] = buckets_.size() - 1;
    index_of_[p.impl()] = k;
    // Every rank starts from rank 0's values (they are equal already when initialised by
    // name; this also covers models loaded or perturbed per rank).
    Tensor view = flat_params_.narrow(0, param_offset_[k], p.numel()).reshape(p.shape());
    p.rebind_(view);
    p.set_grad(flat_grads_.narrow(0, param_offset_[k], p.numel()).reshape(p.shape()));
    p.add_grad_ready_hook([this](Tensor& param) { on_grad_ready(param); });
  }
  group_->broadcast(flat_params_, 0)->wait();

  if (options_.zero1) {
    int64_t shard = 0;
    for (Bucket& b : buckets_) {
      b.shard_offset = shard;
      const int64_t cb = chunk_begin(b), cl = chunk_length(b);
      // Cut this rank's chunk of the bucket at parameter boundaries.
      for (size_t k = 0; k < params_.size(); ++k) {
        const int64_t pb = param_offset_[k], pe = pb + params_[k].numel();
        const int64_t lo = std::max(pb, cb), hi = std::min(pe, cb + cl);
        if (lo < hi) segments_.push_back({k, lo, hi - lo, shard + (lo - cb)});
      }
      shard += cl;
    }
    shard_grads_ = Tensor::zeros({shard}, DType::f32, device_);
    exp_avg_ = Tensor::zeros({shard}, DType::f32, device_);
    exp_avg_sq_ = Tensor::zeros({shard}, DType::f32, device_);
  }
  log().info("{}: {} parameters ({:.1f} MiB) in {} buckets over dp={}", name(), params_.size(),
             static_cast<double>(total) * 4 / (1 << 20), buckets_.size(), group_->size());
}

void DataParallel::begin_backward(bool last_micro_step) {
  last_micro_step_ = last_micro_step;
  in_backward_ = true;
  if (!last_micro_step) return;
  launched_early_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = b.params;
    b.work = nullptr;
  }
}

void DataParallel::on_grad_ready(Tensor& param) {
  if (!in_backward_ || !last_micro_step_) return;
  auto it = index_of_.find(param.impl());
  BRAID_CHECK(it != index_of_.end(), "grad-ready hook for a parameter data parallel does not own");
  Bucket& b = buckets_[bucket_of_[it->second]];
  if (--b.pending == 0 && !b.holds_shared) {
    launch(bucket_of_[it->second]);
    ++launched_early_;
  }
}

void DataParallel::launch(size_t index) {
  Bucket& b = buckets_[index];
  Tensor grads = flat_grads_.narrow(0, b.begin, b.end - b.begin);
  if (options_.zero1) {
    Tensor out = shard_grads_.narrow(0, b.shard_offset, chunk_length(b));
    b.work = group_->reduce_scatter(grads, out, dist::ReduceOp::avg);
  } else {
    b.work = group_->all_reduce(grads, dist::ReduceOp::avg);
  }
}

void DataParallel::finish_backward() {
  in_backward_ = false;
  // Shared copies' gradients are summed first, so their buckets reduce the sum.
  sum_shared_gradients();
  // Buckets with a parameter that got no gradient this pass never launched from a hook; the
  // graph is the same on every rank, so launching them here keeps the order identical.
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (!buckets_[i].work) launch(i);
  for (Bucket& b : buckets_) b.work->wait();
}

optim::ClipResult DataParallel::clip(float max_norm) {
  if (!options_.zero1) return Strategy::clip(max_norm);
  // Each rank holds a disjoint piece of the averaged gradient: sum the squares over dp, then
  // over tp for the parameters tensor parallelism splits.
  if (!device_.is_cpu()) {
    // The same sums on the device, through the device communicators; nothing read back.
    std::vector<Tensor> sharded, replicated;
    for (const Segment& seg : segments_) {
      if (!counted_[seg.param]) continue;
      (tp_sharded_[seg.param] ? sharded : replicated)
          .push_back(shard_grads_.narrow(0, seg.shard_begin, seg.length));
    }
    Tensor squares = Tensor::empty({2}, DType::f32, device_);
    Tensor sharded_squares = squares.narrow(0, 0, 1), replicated_squares = squares.narrow(0, 1, 1);
    ops::kernel<ops::GradSquaresKernel>(device_)(sharded, sharded_squares);
    ops::kernel<ops::GradSquaresKernel>(device_)(replicated, replicated_squares);
    group_->all_reduce(squares, dist::ReduceOp::sum)->wait();
    return clip_from_device_squares(squares, *grid_, max_norm);
  }
  GradSquares local;
  for (const Segment& seg : segments_) {
    if (!counted_[seg.param]) continue;
    (tp_sharded_[seg.param] ? local.sharded : local.replicated) +=
        sum_of_squares(shard_grads_.narrow(0, seg.shard_begin, seg.length));
  }
  Tensor squares = Tensor::from_vector(
      std::vector<float>{static_cast<float>(local.sharded), static_cast<float>(local.replicated)},
      {2});
  host_group_->all_reduce(squares, dist::ReduceOp::sum)->wait();
  const std::vector<float> dp_total = squares.to_vector();
  return optim::clip_for_norm(global_grad_norm({dp_total[0], dp_total[1]}, *grid_), max_norm);
}

void DataParallel::step(float lr, float grad_scale) {
  if (!options_.zero1) {
    Strategy::step(lr, grad_scale);
    return;
  }
  autograd::NoGradGuard no_grad;
  auto& optimizer = dynamic_cast<optim::AdamW&>(*optimizer_);
  const auto& adamw = optimizer.options();
  // The optimizer keeps the count, so that a device step's skips come off it once the host
  // reads them (count_device_skips), as for the optimizer's own steps. A device step takes its
  // scale and skip flag from the optimizer's record; the kernel drops the skips not yet counted.
  optimizer.count_step();
  const int64_t update_step = optimizer.steps_taken();
  const Tensor& record = optimizer.device_record();
  const bool device_step = record.defined() && record.device() == device_;
  // This rank's segments, updated in one call: each as views into the flat buffers, which stay
  // in `views` (reserved, so the updates' pointers into it stay valid) until the call returns.
  struct SegmentViews {
    Tensor param, grad, exp_avg, exp_avg_sq;
  };
  std::vector<SegmentViews> views;
  views.reserve(segments_.size());
  std::vector<ops::AdamWUpdate> updates;
  for (const Segment& s : segments_) {
    SegmentViews& v =
        views.emplace_back(SegmentViews{flat_params_.narrow(0, s.flat_begin, s.length),
                                        shard_grads_.narrow(0, s.shard_begin, s.length),
                                        exp_avg_.narrow(0, s.shard_begin, s.length),
                                        exp_avg_sq_.narrow(0, s.shard_begin, s.length)});
    updates.push_back({&v.param, &v.grad, &v.exp_avg, &v.exp_avg_sq,
                       ops::AdamWHyper{lr, adamw.beta1, adamw.beta2, adamw.eps,
                                       weight_decay_[s.param], update_step}});
  }
  if (device_step) {
    ops::kernel<ops::AdamWGroupDeviceKernel>(device_)(updates, record, optimizer.device_state(),
                                                      optimizer.bias_table(device_, update_step),
                                                      optimizer.device_skips_counted());
  } else {
    ops::kernel<ops::AdamWGroupKernel>(device_)(updates, grad_scale);
  }
  // Every rank gathers every bucket's updated chunks.
  std::vector<dist::WorkPtr> works;
  std::vector<Tensor> sent;
  for (const Bucket& b : buckets_) {
    sent.push_back(flat_params_.narrow(0, chunk_begin(b), chunk_length(b)).clone());
    Tensor out = flat_params_.narrow(0, b.begin, b.end - b.begin);
    works.push_back(group_->all_gather(sent.back(), out));
  }
  for (auto& w : works) w->wait();
}

double DataParallel::reduce_metric(double value) {
  Tensor t = Tensor::full({1}, static_cast<float>(value));
  host_group_->all_reduce(t, dist::ReduceOp::avg)->wait();
  return t.item();
}

optim::OwnedState DataParallel::owned_state(optim::Optimizer& optimizer) {
  if (!options_.zero1) return Strategy::owned_state(optimizer);
  optim::OwnedState out;
  out.steps_taken = optimizer.steps_taken();
  out.replicated = false;
  for (const Segment& s : segments_) {
    optim::StateShard shard;
    shard.name = optimizer.params()[s.param].name;
    shard.param = s.param;
    shard.begin = s.flat_begin - param_offset_[s.param];
    shard.length = s.length;
    shard.value = flat_params_.narrow(0, s.flat_begin, s.length);
    shard.state = {{"exp_avg", exp_avg_.narrow(0, s.shard_begin, s.length)},
                   {"exp_avg_sq", exp_avg_sq_.narrow(0, s.shard_begin, s.length)}};
    // step() updates every segment from the reduced chunk, with or without a local gradient.
    shard.grad = shard_grads_.narrow(0, s.shard_begin, s.length);
    shard.weight_decay = weight_decay_[s.param];
    shard.steps = optimizer.steps_taken();
    out.shards.push_back(std::move(shard));
  }
  return out;
}

void DataParallel::gather_optimizer_state(optim::Optimizer& optimizer) {
  if (!options_.zero1) return;
  autograd::NoGradGuard no_grad;
  // Every rank's chunks of each bucket, gathered into whole flat moments.
  const int64_t total = flat_params_.numel();
  Tensor m = Tensor::zeros({total}, DType::f32, device_);
  Tensor v = Tensor::zeros({total}, DType::f32, device_);
  std::vector<dist::WorkPtr> works;
  for (const Bucket& b : buckets_) {
    Tensor m_out = m.narrow(0, b.begin, b.end - b.begin);
    Tensor v_out = v.narrow(0, b.begin, b.end - b.begin);
    works.push_back(group_->all_gather(exp_avg_.narrow(0, b.shard_offset, chunk_length(b)), m_out));
    works.push_back(
        group_->all_gather(exp_avg_sq_.narrow(0, b.shard_offset, chunk_length(b)), v_out));
  }
  for (auto& w : works) w->wait();
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto state = optimizer.param_state(k);  // AdamW: exp_avg, exp_avg_sq
    Tensor dst_m = state.at(0).second, dst_v = state.at(1).second;
    dst_m.copy_(m.narrow(0, param_offset_[k], params_[k].numel()).reshape(params_[k].shape()));
    dst_v.copy_(v.narrow(0, param_offset_[k], params_[k].numel()).reshape(params_[k].shape()));
  }
}

std::map<std::string, Tensor> DataParallel::state() const {
  if (!options_.zero1) return {};
  return {{"zero1.exp_avg", exp_avg_},
          {"zero1.exp_avg_sq", exp_avg_sq_},
          {"zero1.step", Tensor::full({1}, static_cast<float>(optimizer_->steps_taken()))}};
}

}  // namespace braid::parallel
