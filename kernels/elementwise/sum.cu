// CUDA sum and sum of squares in double: per-block partials, then one block combines them.
#include "elementwise/sum.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Stage 1: block b writes partials[2b] = its sum, partials[2b + 1] = its sum of squares.
__global__ void sum_partials_kernel(const float* x, int64_t n, double* partials) {
  double s = 0.0, sq = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    s += v;
    sq += v * v;
  }
  s = block_sum(s);
  sq = block_sum(sq);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = s;
    partials[2 * blockIdx.x + 1] = sq;
  }
}

// Stage 2 (one block): totals[0], totals[1] = the sums of the stage-1 partials.
__global__ void sum_finish_kernel(const double* partials, int count, double* totals) {
  double s = 0.0, sq = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    s += partials[2 * i];
    sq += partials[2 * i + 1];
  }
  s = block_sum(s);
  sq = block_sum(sq);
  if (threadIdx.x == 0) {
    totals[0] = s;
    totals[1] = sq;
  }
}

void launch_sum(const float* x, int64_t n, double* host_totals, cudaStream_t stream) {
  const int blocks = sum_blocks(n);
  ScratchBuffer scratch(sizeof(double) * (2 * static_cast<size_t>(blocks) + 2), stream);
  double* partials = scratch.as<double>();
  double* totals = partials + 2 * blocks;
  sum_partials_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(x, n, partials);
  BRAID_CUDA_CHECK_LAUNCH();
  sum_finish_kernel<<<1, kThreadsPerBlock, 0, stream>>>(partials, blocks, totals);
  BRAID_CUDA_CHECK_LAUNCH();
  BRAID_CUDA_CHECK(
      cudaMemcpyAsync(host_totals, totals, 2 * sizeof(double), cudaMemcpyDeviceToHost, stream));
  BRAID_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

void sum(const Tensor& x, double* total, double* total_squares) {
  constexpr const char* kOp = "sum";
  check_cuda_tensor(x, kOp, "x");
  check_contiguous(x, kOp, "x");
  double totals[2] = {0.0, 0.0};
  if (x.numel() > 0) {
    DeviceGuard guard(x.device().index);
    launch_sum(static_cast<const float*>(x.data_ptr()), x.numel(), totals, current_stream());
  }
  if (total != nullptr) *total = totals[0];
  if (total_squares != nullptr) *total_squares = totals[1];
}

}  // namespace braid::cuda
