// Checkpoints of device-resident state (a tiny GPT and its AdamW trained on a CUDA device, or
// on the SIMT emulator): sync, async and overlapped snapshots off the device are bitwise equal
// to each other and to a snapshot of the same state copied to the host; a checkpoint saved from
// the device loads on the CPU and one saved on the CPU loads into device tensors, also resharded
// to tp=2, bitwise; a step skipped by a device flag inside a window is replayed as skipped;
// every copy off the device runs on its copy stream; the pinned buffers are made once; and the
// Trainer's overlapped checkpoint on the device equals its sync one. Skips without a device. On
// the emulator device memory faults on any host read or write, so a pass also proves that
// snapshotting never touches device memory from the host.
//
// Most tests drive the model, the optimizer and the Checkpointer themselves, as the Trainer's
// step does (backward, before_update, update, after_update), to choose each call's arguments;
// the last runs the Trainer on the device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/ckpt/checkpoint.h"
#include "braid/ckpt/overlapped_window.h"
#include "braid/core/allocator.h"
#include "braid/core/pinned_memory.h"
#include "braid/core/stream.h"
#include "braid/core/tensor.h"
#include "braid/data/token_shard.h"
#include "braid/dist/parallel_grid.h"
#include "braid/dist/solo_process_group.h"
#include "braid/nn/gpt.h"
#include "braid/nn/tensor_parallel.h"
#include "braid/optim/optimizer.h"
#include "braid/optim/owned_state.h"
#include "braid/train/config.h"
#include "braid/train/trainer.h"
#include "support/test_util.h"

#ifdef BRAID_WITH_CUDA
#include "cuda_runtime.cuh"
#endif
#ifdef BRAID_SIMT
#include "simt/emulated_device.h"
#endif

#ifndef BRAID_WITH_CUDA

TEST(DeviceCheckpoints, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA";
}

#else

namespace braid {
namespace {

namespace fs = std::filesystem;
using testing::bitwise_equal;

#define SKIP_WITHOUT_DEVICE() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"

Device gpu_device() {
  cuda::ensure_registered();
  return Device::cuda(0);
}

nn::GptConfig tiny_gpt() {
  nn::GptConfig config;
  config.vocab_size = 50;
  config.padded_vocab_multiple = 16;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 16;
  config.block_size = 8;
  return config;
}

// The step's learning rate and clip scale: both change from step to step, as in training.
float lr_at(int step) {
  return 1e-2f * static_cast<float>(1 + step % 3);
}
float scale_at(int step) {
  return 0.3f + 0.1f * static_cast<float>(step);  // never 1, the default scale
}

// A tiny GPT and its AdamW on one device, trained step by step.
struct TrainedGpt {
  explicit TrainedGpt(Device d, nn::TensorParallelPtr tp = nullptr)
      : device(d), model(tiny_gpt(), std::move(tp)) {
    model.init_weights(7);
    model.to(device);  // before the optimizer: its moments are made on the parameters' device
    optimizer = std::make_unique<optim::AdamW>(optim::decay_groups(model.named_parameters(), 0.1f),
                                               optim::AdamWOptions{0.9f, 0.95f, 1e-8f});
  }
  // The gradients of step `step`'s batch (the update is separate, as the Trainer's step is).
  void backward(int step) {
    optimizer->zero_grad();
    const Tensor ids = testing::random_ids({2, 8}, 50, 100 + static_cast<uint64_t>(step));
    const Tensor targets = testing::random_ids({2, 8}, 50, 200 + static_cast<uint64_t>(step));
    model.loss(ids.to(device), targets.to(device)).backward();
  }
  void update(int step) { optimizer->step(lr_at(step), scale_at(step)); }
  void train(int step) {
    backward(step);
    update(step);
  }
  optim::OwnedState owned() { return optim::whole_parameters(*optimizer); }

  Device device;
  nn::Gpt model;
  std::unique_ptr<optim::AdamW> optimizer;
};

// The state of `run` (weights, both moments, per parameter), copied to the host.
std::vector<Tensor> state_on_host(TrainedGpt& run) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < run.optimizer->params().size(); ++i) {
    out.push_back(run.optimizer->params()[i].param.to(Device::cpu()));
    for (const auto& [name, t] : run.optimizer->param_state(i)) out.push_back(t.to(Device::cpu()));
  }
  return out;
}

std::vector<int64_t> steps_of(const TrainedGpt& run) {
  std::vector<int64_t> out{run.optimizer->steps_taken()};
  for (size_t i = 0; i < run.optimizer->params().size(); ++i)
    out.push_back(run.optimizer->param_steps(i));
  return out;
}

void expect_same_state(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "tensor " << i;
}

// `from`'s state copied into `to` (a run on another device), step counters included.
void copy_state(TrainedGpt& from, TrainedGpt& to) {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < from.optimizer->params().size(); ++i) {
    Tensor(to.optimizer->params()[i].param).copy_(from.optimizer->params()[i].param);
    const auto src = from.optimizer->param_state(i), dst = to.optimizer->param_state(i);
    for (size_t k = 0; k < src.size(); ++k) Tensor(dst[k].second).copy_(src[k].second);
  }
  std::vector<int64_t> steps;
  for (size_t i = 0; i < from.optimizer->params().size(); ++i)
    steps.push_back(from.optimizer->param_steps(i));
  to.optimizer->restore_steps(from.optimizer->steps_taken(), steps);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every copy the device backend is asked for while it lives: copy_async's stream handles, and
// the synchronous copies of Tensor::to / copy_ (which run on the compute stream).
class CopyLog {
 public:
  CopyLog() {
    const std::lock_guard lock(mutex());
    active() = this;
    stream_ops_ = stream_ops(DeviceKind::cuda);
    memory_ops_ = device_memory(DeviceKind::cuda);
    StreamOps streams = stream_ops_;
    streams.copy = &log_async;
    register_stream_ops(DeviceKind::cuda, streams);
    DeviceMemoryOps memory = memory_ops_;
    memory.copy = &log_sync;
    register_device_memory(DeviceKind::cuda, memory);
  }
  ~CopyLog() {
    const std::lock_guard lock(mutex());
    register_stream_ops(DeviceKind::cuda, stream_ops_);
    register_device_memory(DeviceKind::cuda, memory_ops_);
    active() = nullptr;
  }
  std::vector<void*> async_streams() const {
    const std::lock_guard lock(mutex());
    return async_streams_;
  }
  int sync_copies() const {
    const std::lock_guard lock(mutex());
    return sync_copies_;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static CopyLog*& active() {
    static CopyLog* log = nullptr;
    return log;
  }
  static void log_async(void* dst, Device dst_device, const void* src, Device src_device,
                        size_t bytes, void* stream, int device_index) {
    CopyLog* log = nullptr;
    {
      const std::lock_guard lock(mutex());
      log = active();
      log->async_streams_.push_back(stream);
    }
    log->stream_ops_.copy(dst, dst_device, src, src_device, bytes, stream, device_index);
  }
  static void log_sync(void* dst, Device dst_device, const void* src, Device src_device,
                       size_t bytes) {
    CopyLog* log = nullptr;
    {
      const std::lock_guard lock(mutex());
      log = active();
      ++log->sync_copies_;
    }
    log->memory_ops_.copy(dst, dst_device, src, src_device, bytes);
  }

  StreamOps stream_ops_;
  DeviceMemoryOps memory_ops_;
  std::vector<void*> async_streams_;
  int sync_copies_ = 0;
};

class DeviceCheckpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_device_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<ckpt::Checkpointer> checkpointer(const std::string& name, ckpt::Mode mode,
                                                   int window = 3) {
    return std::make_unique<ckpt::Checkpointer>(
        ckpt::CheckpointOptions{(dir_ / name).string(), mode, 0, window}, grid_);
  }
  static ckpt::TrainingState state(int64_t step) {
    ckpt::TrainingState s;
    s.step = step;
    return s;
  }
  // The newest checkpoint of `name`'s data file (one rank writes).
  fs::path shard_file(const std::string& name) const {
    return fs::path(ckpt::resolve_checkpoint((dir_ / name).string())) / "rank_00000.bin";
  }
  // Loads checkpoint `name` into a fresh run on `device` and returns it.
  std::unique_ptr<TrainedGpt> load(const std::string& name, Device device) {
    auto run = std::make_unique<TrainedGpt>(device);
    ckpt::load_checkpoint((dir_ / name).string(), run->model, *run->optimizer, grid_);
    return run;
  }

  fs::path dir_;
  dist::ParallelGrid grid_{std::make_shared<dist::SoloProcessGroup>(),
                           dist::ParallelGrid::default_axes(1, 1, 1, 1)};
};

// After two steps a window of 3 opens; steps 3 and 4 run inside it (step 3 reports its clip
// scale as a host float, step 4 as device scalars), so the checkpoint holds the state after
// step 4. Then sync and async snapshots of the same state (training going on right after the
// async one), and a sync snapshot of that state copied to a CPU model: the four data files are
// the same bytes, and each loads on the CPU to exactly the state copied off the device. Every
// copy off the device the checkpointers ask for is a copy_async on the copy stream: none on
// the compute stream (synchronous copies) nor the legacy default stream.
TEST_F(DeviceCheckpoints, SyncAsyncAndOverlappedSnapshotsEqualAHostSnapshot) {
  SKIP_WITHOUT_DEVICE();
  const Device gpu = gpu_device();
#ifdef BRAID_SIMT
  const uint64_t legacy_before = simt::runtime_call_counts().legacy_stream_ops;
#endif
  TrainedGpt dev(gpu);
  for (int step = 1; step <= 2; ++step) dev.train(step);
  for (const optim::StateShard& s : dev.owned().shards) {
    ASSERT_EQ(s.value.device(), gpu) << s.name;
    for (const auto& [name, t] : s.state) ASSERT_EQ(t.device(), gpu) << s.name << " " << name;
  }
  auto overlapped = checkpointer("overlapped", ckpt::Mode::overlapped, 3);
  auto sync = checkpointer("sync", ckpt::Mode::sync);
  auto async = checkpointer("async", ckpt::Mode::async);
  std::vector<void*> window_streams, snapshot_streams;
  int checkpointer_sync_copies = 0;
  {
    CopyLog log;
    overlapped->save(dev.model, *dev.optimizer, dev.owned(), state(2));
    checkpointer_sync_copies += log.sync_copies();
    window_streams = log.async_streams();
  }
  for (int step = 3; step <= 4; ++step) {
    dev.backward(step);
    {
      CopyLog log;
      if (step == 3) {
        overlapped->before_update(dev.owned(), lr_at(step), scale_at(step), false);
      } else {
        const Tensor scale = Tensor::full({1}, scale_at(step), DType::f32, gpu);
        const Tensor skipped = Tensor::zeros({1}, DType::f32, gpu);
        overlapped->before_update(dev.owned(), lr_at(step), scale, skipped);
      }
      checkpointer_sync_copies += log.sync_copies();
      for (void* s : log.async_streams()) window_streams.push_back(s);
    }
    dev.update(step);
    CopyLog log;
    overlapped->after_update(dev.owned(), [step] { return state(step); });
    checkpointer_sync_copies += log.sync_copies();
    for (void* s : log.async_streams()) window_streams.push_back(s);
  }
  ASSERT_FALSE(overlapped->window_open());
  overlapped->wait();
  const std::vector<Tensor> at_step4 = state_on_host(dev);
  const std::vector<int64_t> steps4 = steps_of(dev);
  TrainedGpt host4(Device::cpu());
  copy_state(dev, host4);
  {
    CopyLog log;
    sync->save(dev.model, *dev.optimizer, dev.owned(), state(4));
    async->save(dev.model, *dev.optimizer, dev.owned(), state(4));
    checkpointer_sync_copies += log.sync_copies();
    snapshot_streams = log.async_streams();
  }
  dev.train(5);  // the async write may still run: its copy must be the state of step 4
  async->wait();
  EXPECT_FALSE(bitwise_equal(state_on_host(dev)[0], at_step4[0])) << "step 5 changed nothing";
  checkpointer("host", ckpt::Mode::sync)
      ->save(host4.model, *host4.optimizer, host4.owned(), state(4));

  const std::string expected = file_bytes(shard_file("host"));
  ASSERT_FALSE(expected.empty());
  for (const std::string name : {"overlapped", "sync", "async"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(fs::path(ckpt::resolve_checkpoint((dir_ / name).string())).filename(),
              "step_00000004");
    EXPECT_TRUE(file_bytes(shard_file(name)) == expected) << "data file differs from the host's";
    auto loaded = load(name, Device::cpu());
    expect_same_state(state_on_host(*loaded), at_step4);
    EXPECT_EQ(steps_of(*loaded), steps4);
  }

  // The window copied 3 tensors per shard and the gradients of later steps for blocks already
  // copied (copy_sizes lists them), plus step 4's two device scalars; the snapshots 3 per shard.
  const size_t shards = dev.owned().shards.size();
  EXPECT_EQ(window_streams.size(),
            ckpt::OverlappedWindow::copy_sizes(dev.owned().shards, 3).size() + 2);
  EXPECT_EQ(snapshot_streams.size(), 2 * 3 * shards);
  void* const copy_stream = Stream::copy(gpu).native();
  ASSERT_NE(copy_stream, Stream::compute(gpu).native());
  for (void* s : window_streams) EXPECT_EQ(s, copy_stream);
  for (void* s : snapshot_streams) EXPECT_EQ(s, copy_stream);
  EXPECT_EQ(checkpointer_sync_copies, 0) << "a checkpoint copy ran on the compute stream";
#ifdef BRAID_SIMT
  EXPECT_EQ(simt::runtime_call_counts().legacy_stream_ops, legacy_before);
#endif
}

// A checkpoint saved on the CPU loads into device tensors (parameters moved to the device
// before the optimizer is built, so its moments live there too), bitwise; and a checkpoint
// saved from the device loads, resharded, into the two ranks of a tensor-parallel (tp=2) model
// on the device: every slice bitwise the matching slice of the saved state.
TEST_F(DeviceCheckpoints, HostCheckpointsLoadOnTheDeviceAndReshard) {
  SKIP_WITHOUT_DEVICE();
  const Device gpu = gpu_device();
  TrainedGpt host(Device::cpu());
  for (int step = 1; step <= 3; ++step) host.train(step);
  checkpointer("host", ckpt::Mode::sync)->save(host.model, *host.optimizer, host.owned(), state(3));
  auto on_device = load("host", gpu);
  for (const auto& [name, p] : on_device->model.named_parameters()) EXPECT_EQ(p.device(), gpu);
  expect_same_state(state_on_host(*on_device), state_on_host(host));
  EXPECT_EQ(steps_of(*on_device), steps_of(host));

  // Saved from the device (async), loaded as tp=2 on the device.
  on_device->train(4);
  host.train(4);
  checkpointer("device", ckpt::Mode::async)
      ->save(on_device->model, *on_device->optimizer, on_device->owned(), state(4));
  const std::vector<Tensor> whole = state_on_host(*on_device);
  const ckpt::Layout tp2{{"tp", 2}, {"cp", 1}, {"dp", 1}, {"pp", 1}};
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(fmt::format("tp rank {}", rank));
    TrainedGpt part(gpu, std::make_shared<nn::LayoutOnlyTensorParallel>(rank, 2));
    ckpt::load_checkpoint((dir_ / "device").string(), part.model, *part.optimizer, tp2);
    const auto specs = part.model.shard_specs();
    const std::vector<Tensor> mine = state_on_host(part);
    size_t k = 0;
    for (size_t i = 0; i < part.optimizer->params().size(); ++i) {
      const optim::ParamEntry& e = part.optimizer->params()[i];
      // The same parameter's place in the single-process state (weights, then both moments).
      size_t at = 0;
      for (size_t j = 0; j < on_device->optimizer->params().size(); ++j)
        if (on_device->optimizer->params()[j].name == e.name) at = 3 * j;
      const nn::ShardSpec& spec = specs.at(e.name);
      for (int s = 0; s < 3; ++s, ++k) {
        EXPECT_EQ(e.param.device(), gpu);
        const Tensor expected = spec.slice(whole[at + s]).contiguous().reshape(mine[k].shape());
        EXPECT_TRUE(bitwise_equal(mine[k], expected)) << e.name << " tensor " << s;
      }
      EXPECT_EQ(part.optimizer->param_steps(i), 4) << e.name;
    }
  }
}

// A step skipped by a device flag inside the window (the update not applied, as a device-side
// clip that found a non-finite norm would leave it, while the host's update counts still
// include it when the next block is copied): the overlapped checkpoint equals a synchronous
// snapshot of a run that skipped the same step.
TEST_F(DeviceCheckpoints, AStepSkippedByADeviceFlagIsReplayedAsSkipped) {
  SKIP_WITHOUT_DEVICE();
  const Device gpu = gpu_device();
  TrainedGpt dev(gpu), reference(gpu);
  for (int step = 1; step <= 2; ++step) {
    dev.train(step);
    reference.train(step);
  }
  auto overlapped = checkpointer("overlapped", ckpt::Mode::overlapped, 3);
  overlapped->save(dev.model, *dev.optimizer, dev.owned(), state(2));
  for (int step = 3; step <= 4; ++step) {
    const bool skip = step == 3;
    dev.backward(step);
    overlapped->before_update(dev.owned(), lr_at(step),
                              Tensor::full({1}, scale_at(step), DType::f32, gpu),
                              Tensor::full({1}, skip ? 1.0f : 0.0f, DType::f32, gpu));
    if (!skip) dev.update(step);
    // A device-side skip is counted by the host only when it reads the device's metrics: until
    // then its update counts run one ahead. The window's counts must not follow them.
    const std::vector<int64_t> counts = steps_of(dev);
    if (skip) {
      std::vector<int64_t> ahead(counts.begin() + 1, counts.end());
      for (int64_t& c : ahead) ++c;
      dev.optimizer->restore_steps(counts[0] + 1, ahead);
    }
    overlapped->after_update(dev.owned(), [step] { return state(step); });
    dev.optimizer->restore_steps(counts[0], std::vector<int64_t>(counts.begin() + 1, counts.end()));
    if (!skip) reference.train(step);
  }
  overlapped->wait();
  checkpointer("sync", ckpt::Mode::sync)
      ->save(reference.model, *reference.optimizer, reference.owned(), state(4));
  EXPECT_TRUE(file_bytes(shard_file("overlapped")) == file_bytes(shard_file("sync")));
  auto loaded = load("overlapped", Device::cpu());
  expect_same_state(state_on_host(*loaded), state_on_host(reference));
  EXPECT_EQ(steps_of(*loaded), steps_of(reference));
  EXPECT_EQ(steps_of(*loaded)[1], 3) << "the skipped step must not count";
}

// The buffers device snapshots copy into are pinned, prepared ahead (Checkpointer::prepare) and
// kept: after prepare, neither a snapshot nor a whole overlapped window allocates pinned memory
// again, and the next snapshot reuses the image. A host run's image stays ordinary memory.
TEST_F(DeviceCheckpoints, PinnedBuffersArePreparedOnceAndReused) {
  SKIP_WITHOUT_DEVICE();
  const Device gpu = gpu_device();
  TrainedGpt dev(gpu), host(Device::cpu());
  dev.train(1);
  host.train(1);
  auto async = checkpointer("async", ckpt::Mode::async);
  async->prepare(dev.model, *dev.optimizer, dev.owned());
  async->wait();
  ASSERT_NE(async->snapshot_buffer(), nullptr);
  EXPECT_TRUE(is_pinned(*async->snapshot_buffer()));
  const Storage* image = async->snapshot_buffer();
  const int64_t allocations = pinned_memory_stats().allocations;
  for (int step = 2; step <= 3; ++step) {
    dev.train(step);
    async->save(dev.model, *dev.optimizer, dev.owned(), state(step));
    async->wait();
    EXPECT_EQ(async->snapshot_buffer(), image) << "step " << step;
  }
  EXPECT_EQ(pinned_memory_stats().allocations, allocations);

  auto overlapped = checkpointer("overlapped", ckpt::Mode::overlapped, 3);
  overlapped->prepare(dev.model, *dev.optimizer, dev.owned());
  overlapped->wait();
  const int64_t prepared = pinned_memory_stats().allocations;
  EXPECT_EQ(prepared, allocations + 2) << "the image and the window's staging buffer";
  overlapped->save(dev.model, *dev.optimizer, dev.owned(), state(3));
  for (int step = 4; step <= 5; ++step) {
    dev.backward(step);
    overlapped->before_update(dev.owned(), lr_at(step), scale_at(step), false);
    dev.update(step);
    overlapped->after_update(dev.owned(), [step] { return state(step); });
  }
  overlapped->wait();
  EXPECT_EQ(pinned_memory_stats().allocations, prepared);
  EXPECT_EQ(fs::path(ckpt::resolve_checkpoint((dir_ / "overlapped").string())).filename(),
            "step_00000005");

  auto on_host = checkpointer("host", ckpt::Mode::sync);
  on_host->save(host.model, *host.optimizer, host.owned(), state(1));
  ASSERT_NE(on_host->snapshot_buffer(), nullptr);
  EXPECT_FALSE(is_pinned(*on_host->snapshot_buffer()));
}

// The Trainer on the device (training.device: cuda) with clipping active: an overlapped
// checkpoint opened after step 5 with a window of 4 holds the state after step 8, the same bytes
// as a synchronous checkpoint of an identical run after step 8.
TEST_F(DeviceCheckpoints, TheTrainersOverlappedCheckpointEqualsASyncOne) {
  SKIP_WITHOUT_DEVICE();
  gpu_device();
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + (i * 7 % 13)));
  data::write_token_shard(dir_ / "train_000.bin", std::span<const int32_t>(tokens));
  auto config = [&](const std::string& mode) {
    return train::parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 2 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{0}/train_*.bin" tokenizer: "byte" }}
optimizer {{ name: "adamw" lr: 1e-2 warmup_steps: 2 grad_clip: 1.0 weight_decay: 0.1 }}
training {{ steps: 20 batch_size: 2 seq_len: 16 val_every: 0 log_every: 100 seed: 3
            device: "cuda" }}
checkpoint {{ dir: "{0}/{1}" mode: "{1}" window: 4 keep: 0 }}
)",
                                           dir_.string(), mode),
                               "device_checkpoints");
  };
  {
    train::Trainer t(config("overlapped"));
    for (int i = 0; i < 5; ++i) t.train_step();
    t.save_checkpoint();
    for (int i = 0; i < 3; ++i) t.train_step();
    t.wait_for_checkpoint();
    EXPECT_GT(t.history().front().grad_norm, 1.0) << "clipping should be active";
  }
  {
    train::Trainer t(config("sync"));
    for (int i = 0; i < 8; ++i) t.train_step();
    t.save_checkpoint();
  }
  for (const std::string name : {"overlapped", "sync"})
    EXPECT_EQ(fs::path(ckpt::resolve_checkpoint((dir_ / name).string())).filename(),
              "step_00000008")
        << name;
  const std::string expected = file_bytes(shard_file("sync"));
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(file_bytes(shard_file("overlapped")) == expected);
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_CUDA
