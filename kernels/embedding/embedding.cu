// CUDA embedding: gather forward; backward by column-tile and vocabulary-class ownership.
#include "embedding/embedding.cuh"

#include <algorithm>

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Tokens whose ids a backward block stages in shared memory at a time.
constexpr int kIdChunk = 1024;
// Enough blocks to spread over a large GPU; more partitions only add id scanning per block.
constexpr int64_t kTargetBlocks = 256;
constexpr int64_t kMaxPartitions = 64;

__global__ void embedding_forward_kernel(const float* weight, const int32_t* ids, int64_t vocab,
                                         int64_t cols, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / cols, col = i - token * cols;
    const int64_t id = ids[token];
    out[i] = (id >= 0 && id < vocab) ? weight[id * cols + col] : __int_as_float(0x7fc00000);
  }
}

// Block (bx, by): columns [bx * blockDim.x, +blockDim.x), vocabulary rows with id % gridDim.y
// == by. Each thread adds its column of every owned token's gradient in token order.
__global__ void embedding_backward_kernel(const int32_t* ids, const float* dout, int64_t tokens,
                                          int64_t vocab, int64_t cols, float* dweight) {
  __shared__ int32_t chunk_ids[kIdChunk];
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t partitions = gridDim.y, mine = blockIdx.y;
  for (int64_t t0 = 0; t0 < tokens; t0 += kIdChunk) {
    const int64_t count = min(static_cast<int64_t>(kIdChunk), tokens - t0);
    __syncthreads();  // the previous chunk's ids are no longer being read
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) chunk_ids[k] = ids[t0 + k];
    __syncthreads();
    if (col >= cols) continue;  // after the barriers: every thread must reach them
    for (int64_t k = 0; k < count; ++k) {
      const int64_t id = chunk_ids[k];
      if (id < 0 || id >= vocab || id % partitions != mine) continue;
      dweight[id * cols + col] += dout[(t0 + k) * cols + col];
    }
  }
}

void launch_embedding_forward(const float* weight, const int32_t* ids, int64_t vocab, int64_t cols,
                              int64_t tokens, float* out, cudaStream_t stream) {
  const int64_t n = tokens * cols;
  embedding_forward_kernel<<<grid_1d(n), kThreadsPerBlock, 0, stream>>>(weight, ids, vocab, cols, n,
                                                                        out);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward(const int32_t* ids, const float* dout, int64_t tokens, int64_t vocab,
                               int64_t cols, float* dweight, cudaStream_t stream) {
  const EmbeddingBackwardGrid plan = plan_embedding_backward(vocab, cols);
  const dim3 grid(static_cast<unsigned>(plan.column_blocks),
                  static_cast<unsigned>(plan.partitions));
  embedding_backward_kernel<<<grid, kEmbeddingColumnsPerBlock, 0, stream>>>(ids, dout, tokens,
                                                                            vocab, cols, dweight);
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

EmbeddingBackwardGrid plan_embedding_backward(int64_t vocab, int64_t cols) {
  EmbeddingBackwardGrid plan;
  plan.column_blocks = std::max<int64_t>(1, ceil_div(cols, kEmbeddingColumnsPerBlock));
  plan.partitions = std::clamp<int64_t>(ceil_div(kTargetBlocks, plan.column_blocks), 1,
                                        std::min(kMaxPartitions, std::max<int64_t>(vocab, 1)));
  return plan;
}

void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out) {
  constexpr const char* kOp = "embedding_forward";
  check_cuda_tensor(weight, kOp, "weight");
  check_cuda_tensor(ids, kOp, "ids", DType::i32);
  check_cuda_tensor(out, kOp, "out");
  check_same_device(ids, weight, kOp, "ids", "weight");
  check_same_device(out, weight, kOp, "out", "weight");
  BRAID_CHECK(weight.dim() == 2, "{} (cuda): weight must be [V, C], got {}", kOp, weight.str());
  check_contiguous(weight, kOp, "weight");
  check_contiguous(ids, kOp, "ids");
  check_contiguous(out, kOp, "out");
  const int64_t tokens = ids.numel(), vocab = weight.size(0), cols = weight.size(1);
  check_shape(out, {tokens, cols}, kOp, "out");
  if (tokens == 0 || cols == 0) return;
  DeviceGuard guard(weight.device().index);
  launch_embedding_forward(static_cast<const float*>(weight.data_ptr()),
                           static_cast<const int32_t*>(ids.data_ptr()), vocab, cols, tokens,
                           static_cast<float*>(out.data_ptr()), current_stream());
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  constexpr const char* kOp = "embedding_backward";
  check_cuda_tensor(ids, kOp, "ids", DType::i32);
  check_cuda_tensor(dout, kOp, "dout");
  check_cuda_tensor(dweight, kOp, "dweight");
  check_same_device(ids, dweight, kOp, "ids", "dweight");
  check_same_device(dout, dweight, kOp, "dout", "dweight");
  BRAID_CHECK(dweight.dim() == 2, "{} (cuda): dweight must be [V, C], got {}", kOp, dweight.str());
  check_contiguous(ids, kOp, "ids");
  check_contiguous(dout, kOp, "dout");
  check_contiguous(dweight, kOp, "dweight");
  const int64_t tokens = ids.numel(), vocab = dweight.size(0), cols = dweight.size(1);
  check_shape(dout, {tokens, cols}, kOp, "dout");
  if (tokens == 0 || cols == 0 || vocab == 0) return;
  DeviceGuard guard(dweight.device().index);
  launch_embedding_backward(static_cast<const int32_t*>(ids.data_ptr()),
                            static_cast<const float*>(dout.data_ptr()), tokens, vocab, cols,
                            static_cast<float*>(dweight.data_ptr()), current_stream());
}

}  // namespace braid::cuda
