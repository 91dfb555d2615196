// Micro benchmarks of a checkpoint's two costs to training: the snapshot copy it waits for,
// and the CPU the writer thread takes to write the shard.
//   braid_micro_bench --benchmark_filter='CheckpointSnapshot|ShardFile'
// The writer thread shares the cores with training, so what counts for it is the process CPU
// time per shard (the "CPU" column), not the wall time, which is mostly the disk.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <vector>

#include "braid/core/generator.h"
#include "braid/core/tensor.h"
#include "ckpt/shard_writer.h"  // private to libbraid
#include "ckpt/snapshot_image.h"

namespace {

using braid::Tensor;

// The tensors a checkpoint of the small GPT of checkpoint_stall holds (4 layers, width 256,
// vocabulary 257 padded to 320, 128 positions): each parameter, then its two AdamW moments.
std::vector<Tensor> small_gpt_state() {
  const int64_t c = 256;
  std::vector<braid::Shape> shapes = {{320, c}, {128, c}};
  for (int layer = 0; layer < 4; ++layer) {
    for (braid::Shape s : std::vector<braid::Shape>{{c},
                                                    {c},
                                                    {3 * c, c},
                                                    {3 * c},
                                                    {c, c},
                                                    {c},
                                                    {c},
                                                    {c},
                                                    {4 * c, c},
                                                    {4 * c},
                                                    {c, 4 * c},
                                                    {c}})
      shapes.push_back(s);
  }
  shapes.push_back({c});
  shapes.push_back({c});
  std::vector<Tensor> state;
  uint64_t stream = 0;
  for (int copy = 0; copy < 3; ++copy) {
    for (const braid::Shape& s : shapes) {
      Tensor t = Tensor::empty(s);
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = braid::normal_at(7, stream, i);
      state.push_back(t);
      ++stream;
    }
  }
  return state;
}

std::vector<braid::ckpt::ShardEntry> entries_of(const std::vector<Tensor>& tensors) {
  std::vector<braid::ckpt::ShardEntry> entries;
  for (const Tensor& t : tensors)
    entries.push_back(
        {"t" + std::to_string(entries.size()), t, braid::nn::ShardSpec::whole(t.shape())});
  return entries;
}

// The copy a checkpoint makes while training waits (real time, all threads): into the
// file-shaped image, checksumming on the way.
void BM_CheckpointSnapshot(benchmark::State& state) {
  const std::vector<Tensor> tensors = small_gpt_state();
  int64_t bytes = 0;
  for (const Tensor& t : tensors) bytes += static_cast<int64_t>(t.nbytes());
  for (auto _ : state) {
    std::vector<braid::ckpt::ShardEntry> entries = entries_of(tensors);
    braid::ckpt::snapshot_values(entries);
    benchmark::DoNotOptimize(entries.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_CheckpointSnapshot)->Unit(benchmark::kMillisecond)->UseRealTime();

// Writing one rank's shard (data file and manifest, fsynced) from that snapshot, as the
// writer thread does.
void BM_ShardFileWrite(benchmark::State& state) {
  const std::vector<Tensor> tensors = small_gpt_state();
  std::vector<braid::ckpt::ShardEntry> entries = entries_of(tensors);
  braid::ckpt::snapshot_values(entries);
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / "braid_shard_file_bench";
  std::filesystem::create_directories(folder);
  int64_t bytes = 0;
  for (const Tensor& t : tensors) bytes += static_cast<int64_t>(t.nbytes());
  for (auto _ : state) braid::ckpt::write_rank_shard(folder, 0, entries, {}, 0);
  std::filesystem::remove_all(folder);
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_ShardFileWrite)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace
