// Data parallelism as a Strategy: bucketed gradient all-reduce overlapped with the backward
// pass, and ZeRO-1 (reduce-scatter, sharded AdamW state, all-gather of updated parameters).
//
// Parameters and gradients move into flat buffers laid out in reverse registration order,
// so the gradients that are ready first (the last layers) fill the first buckets. Each
// bucket is reduced as soon as all its parameters fired their grad-ready hook during the
// last micro-batch's backward; earlier micro-batches only accumulate.
//
// On a device (parameters on cuda) the flat buffers live there and the buckets go through the
// grid's device communicator of the dp axis (ParallelGrid::group_for): each reduction is issued
// from the hook on the group's stream, ordered after the gradient's producer by an event on the
// compute stream, and finish_backward makes the compute stream wait for them (Work::wait orders
// the stream): no host synchronisation per bucket.
#pragma once

#include <unordered_map>
#include <vector>

#include "braid/parallel/strategy.h"

namespace braid::parallel {

struct DataParallelOptions {
  double bucket_mb = 4.0;  // bucket size in MiB of f32 gradients
  bool zero1 = false;      // shard the optimizer state over the dp axis

  static DataParallelOptions parse(const StrategyOptions& options, bool zero1);
};

// The strategy of a single process (and of dp = 1): the default hooks, with the gradient
// squares for clipping taken as each gradient becomes final (optim::ReadyGradSquares).
class SingleProcess final : public Strategy {
 public:
  std::string name() const override { return "none"; }
  void setup(nn::Module& model, optim::Optimizer& optimizer,
             const dist::ParallelGrid& grid) override;
  void begin_backward(bool last_micro_step) override;
};

class DataParallel final : public Strategy {
 public:
  explicit DataParallel(DataParallelOptions options) : options_(options) {}
  std::string name() const override { return options_.zero1 ? "zero1" : "ddp"; }

  void setup(nn::Module& model, optim::Optimizer& optimizer,
             const dist::ParallelGrid& grid) override;
  void begin_backward(bool last_micro_step) override;
  void on_grad_ready(Tensor& param) override;
  void finish_backward() override;
  optim::ClipResult clip(float max_norm) override;
  void step(float lr, float grad_scale) override;
  double reduce_metric(double value) override;
  std::map<std::string, Tensor> state() const override;
  // ZeRO-1: every rank owns its chunks of the flat buffers (parameters and moments), cut at
  // parameter boundaries, so each data-parallel rank writes and loads its own part of a
  // checkpoint.
  optim::OwnedState owned_state(optim::Optimizer& optimizer) override;
  void gather_optimizer_state(optim::Optimizer& optimizer) override;

  // Observability for tests and the overlap benchmark.
  size_t num_buckets() const { return buckets_.size(); }
  // Buckets whose reduction was launched from a hook, before finish_backward, last step.
  size_t buckets_launched_during_backward() const { return launched_early_; }

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;  // range in the flat buffers
    int params = 0;              // parameters in the bucket
    int pending = 0;             // parameters not yet ready in this backward
    bool holds_shared = false;   // waits for the shared gradients' sum: never from a hook
    dist::WorkPtr work;
    int64_t shard_offset = 0;  // ZeRO: where this rank's chunk sits in the shard buffers
  };
  // ZeRO: a run of the shard that belongs to one parameter (one weight decay).
  struct Segment {
    size_t param;
    int64_t flat_begin, length, shard_begin;
  };

  void launch(size_t bucket);
  int64_t chunk_begin(const Bucket& b) const;
  int64_t chunk_length(const Bucket& b) const;

  DataParallelOptions options_;
  dist::ProcessGroupPtr group_;       // the dp axis for the parameters' device
  dist::ProcessGroupPtr host_group_;  // the dp axis's MPI group: host scalars (metrics, norms)
  Device device_;                     // where the parameters and flat buffers live
  std::vector<Tensor> params_;
  std::vector<int64_t> param_offset_;  // start of each parameter in the flat buffers
  std::vector<size_t> bucket_of_;      // parameter -> bucket
  std::unordered_map<const TensorImpl*, size_t> index_of_;
  Tensor flat_grads_, flat_params_;
  std::vector<Bucket> buckets_;
  bool last_micro_step_ = true;
  size_t launched_early_ = 0;
  bool in_backward_ = false;
  // ZeRO-1 state (this rank's shard).
  Tensor shard_grads_, exp_avg_, exp_avg_sq_;
  std::vector<Segment> segments_;
  std::vector<float> weight_decay_;
  std::vector<bool> tp_sharded_;  // per parameter: split over tensor parallelism
  std::vector<bool> counted_;     // per parameter: enters the gradient norm
};

}  // namespace braid::parallel
