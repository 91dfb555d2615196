// CUDA gradient norm over many tensors (double partials, fixed order), clip scale and verdict;
// the norm also in parts (a rank's squares, then the scale from their all-reduced sum).
#include "optim/grad_norm.cuh"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Tensors per partials launch: their pointers, sizes and first blocks travel as one kernel
// argument (well under the 4 KiB a launch may pass), so no table is copied to the device.
constexpr int kSquaresBatch = 32;
// Blocks per tensor: enough to fill the device for large gradients, a fixed function of size.
constexpr int64_t kElementsPerBlock = 16 * 1024;
constexpr int kMaxBlocksPerTensor = 256;

struct SquaresBatch {
  const float* data[kSquaresBatch];
  int64_t numel[kSquaresBatch];
  int first_block[kSquaresBatch + 1];  // block range of tensor t: [first_block[t], [t + 1])
  int count;
};

// Block b of the launch sums the squares of its part of its tensor into partials[b] (double).
__global__ void squares_partials_kernel(SquaresBatch batch, double* partials) {
  const int b = blockIdx.x;
  int t = 0;
  while (t + 1 < batch.count && batch.first_block[t + 1] <= b) ++t;
  const int64_t blocks = batch.first_block[t + 1] - batch.first_block[t];
  const int64_t n = batch.numel[t];
  const float* x = batch.data[t];
  double sq = 0.0;
  for (int64_t i = (b - batch.first_block[t]) * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += blocks * blockDim.x) {
    const double v = x[i];
    sq += v * v;
  }
  sq = block_sum(sq);
  if (threadIdx.x == 0) partials[b] = sq;
}

// clip = {sqrt(total), clip_for_norm's scale}.
__device__ void write_clip(double total, float max_norm, float* clip) {
  const double norm = sqrt(total);
  float scale = 1.0f;
  if (max_norm > 0 && isfinite(norm)) {
    const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
    if (coef < 1.0) scale = static_cast<float>(coef);
  }
  clip[0] = static_cast<float>(norm);
  clip[1] = scale;
}

// One block: the partials' sum, its square root, and clip_for_norm's scale.
__global__ void clip_finish_kernel(const double* partials, int count, float max_norm, float* clip) {
  double total = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) total += partials[i];
  total = block_sum(total);
  if (threadIdx.x == 0) write_clip(total, max_norm, clip);
}

// One block: the partials' sum, rounded to f32 (what the communicators carry).
__global__ void squares_finish_kernel(const double* partials, int count, float* squares) {
  double total = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) total += partials[i];
  total = block_sum(total);
  if (threadIdx.x == 0) squares[0] = static_cast<float>(total);
}

// One thread: the squares summed in order in double, then the norm and scale.
__global__ void clip_from_squares_kernel(const float* squares, int count, float max_norm,
                                         float* clip) {
  double total = 0.0;
  for (int i = 0; i < count; ++i) total += static_cast<double>(squares[i]);
  write_clip(total, max_norm, clip);
}

__global__ void step_verdict_kernel(const float* loss, const float* clip, int64_t step,
                                    float* record, float* state) {
  const float l = loss[0], norm = clip[0];
  const bool skip = !isfinite(l) || !isfinite(norm);
  record[ops::kRecordLoss] = l;
  record[ops::kRecordNorm] = norm;
  record[ops::kRecordScale] = clip[1];
  record[ops::kRecordSkip] = skip ? 1.0f : 0.0f;
  if (skip) {
    state[ops::kStateSkipped] += 1.0f;
    if (state[ops::kStateFirstNonFinite] == 0.0f)
      state[ops::kStateFirstNonFinite] = static_cast<float>(step + 1);
  }
}

int blocks_for(int64_t n) {
  return static_cast<int>(
      std::clamp<int64_t>((n + kElementsPerBlock - 1) / kElementsPerBlock, 1, kMaxBlocksPerTensor));
}

// The double partials of the squares of `grads` (checked against `out`'s device), launched on
// the current stream into `scratch`; returns their count.
int squares_partials(std::span<const Tensor> grads, const Tensor& out, const char* op,
                     std::optional<ScratchBuffer>& scratch) {
  std::vector<const Tensor*> live;
  for (const Tensor& g : grads) {
    check_cuda_tensor(g, op, "grad");
    check_same_device(g, out, op, "grad", "out");
    check_contiguous(g, op, "grad");
    if (g.numel() > 0) live.push_back(&g);
  }
  int total_blocks = 0;
  for (const Tensor* g : live) total_blocks += blocks_for(g->numel());
  cudaStream_t stream = current_stream();
  scratch.emplace(sizeof(double) * std::max(total_blocks, 1), stream);
  double* partials = scratch->as<double>();
  int done = 0;
  for (size_t begin = 0; begin < live.size(); begin += kSquaresBatch) {
    SquaresBatch batch{};
    batch.count = static_cast<int>(std::min<size_t>(kSquaresBatch, live.size() - begin));
    batch.first_block[0] = 0;
    for (int t = 0; t < batch.count; ++t) {
      const Tensor& g = *live[begin + t];
      batch.data[t] = static_cast<const float*>(g.data_ptr());
      batch.numel[t] = g.numel();
      batch.first_block[t + 1] = batch.first_block[t] + blocks_for(g.numel());
    }
    squares_partials_kernel<<<batch.first_block[batch.count], kThreadsPerBlock, 0, stream>>>(
        batch, partials + done);
    BRAID_CUDA_CHECK_LAUNCH();
    done += batch.first_block[batch.count];
  }
  return total_blocks;
}

}  // namespace

void grad_norm(std::span<const Tensor> grads, float max_norm, Tensor& clip) {
  constexpr const char* kOp = "grad_norm";
  check_cuda_tensor(clip, kOp, "clip");
  check_contiguous(clip, kOp, "clip");
  check_shape(clip, {2}, kOp, "clip");
  DeviceGuard guard(clip.device().index);
  std::optional<ScratchBuffer> scratch;
  const int count = squares_partials(grads, clip, kOp, scratch);
  clip_finish_kernel<<<1, kThreadsPerBlock, 0, current_stream()>>>(
      scratch->as<double>(), count, max_norm, static_cast<float*>(clip.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

void grad_squares(std::span<const Tensor> grads, Tensor& squares) {
  constexpr const char* kOp = "grad_squares";
  check_cuda_tensor(squares, kOp, "squares");
  check_contiguous(squares, kOp, "squares");
  check_shape(squares, {1}, kOp, "squares");
  DeviceGuard guard(squares.device().index);
  std::optional<ScratchBuffer> scratch;
  const int count = squares_partials(grads, squares, kOp, scratch);
  squares_finish_kernel<<<1, kThreadsPerBlock, 0, current_stream()>>>(
      scratch->as<double>(), count, static_cast<float*>(squares.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

void clip_from_squares(const Tensor& squares, float max_norm, Tensor& clip) {
  constexpr const char* kOp = "clip_from_squares";
  check_cuda_tensor(squares, kOp, "squares");
  check_contiguous(squares, kOp, "squares");
  check_cuda_tensor(clip, kOp, "clip");
  check_contiguous(clip, kOp, "clip");
  check_shape(clip, {2}, kOp, "clip");
  check_same_device(squares, clip, kOp, "squares", "clip");
  BRAID_CHECK(squares.dtype() == DType::f32 && squares.numel() >= 1,
              "clip_from_squares (cuda): squares {} must be f32 with at least one element",
              squares.str());
  DeviceGuard guard(clip.device().index);
  clip_from_squares_kernel<<<1, 1, 0, current_stream()>>>(
      static_cast<const float*>(squares.data_ptr()), static_cast<int>(squares.numel()), max_norm,
      static_cast<float*>(clip.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

void step_verdict(const Tensor& loss, const Tensor& clip, int64_t step, Tensor& record,
                  Tensor& state) {
  constexpr const char* kOp = "step_verdict";
  const std::pair<const Tensor*, const char*> all[] = {
      {&loss, "loss"}, {&clip, "clip"}, {&record, "record"}, {&state, "state"}};
  for (const auto& [t, role] : all) {
    check_cuda_tensor(*t, kOp, role);
    check_same_device(*t, record, kOp, role, "record");
    check_contiguous(*t, kOp, role);
  }
  BRAID_CHECK(loss.numel() == 1 && clip.numel() == 2 && record.numel() == ops::kStepRecord &&
                  state.numel() == ops::kStepState,
              "step_verdict (cuda): loss {}, clip {}, record {}, state {} must hold 1, 2, {}, {} "
              "elements",
              loss.str(), clip.str(), record.str(), state.str(), ops::kStepRecord, ops::kStepState);
  DeviceGuard guard(record.device().index);
  step_verdict_kernel<<<1, 1, 0, current_stream()>>>(
      static_cast<const float*>(loss.data_ptr()), static_cast<const float*>(clip.data_ptr()), step,
      static_cast<float*>(record.data_ptr()), static_cast<float*>(state.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace braid::cuda
