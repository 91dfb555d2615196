// CUDA sum_to: per-chunk column partials in double, then a pass adding them up in chunk order.
#include "elementwise/sum_to.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Fast path, pass 1: x is [rows, cols]; block (bx, chunk) sums rows of its chunk for its columns.
// Adjacent threads read adjacent columns, so every row read is coalesced.
__global__ void sum_to_columns_kernel(const float* x, int64_t rows, int64_t cols,
                                      int64_t rows_per_chunk, double* partials) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  double acc = 0.0;
  for (int64_t r = r0; r < r1; ++r) acc += x[r * cols + c];
  partials[blockIdx.y * cols + c] = acc;
}

// General path, pass 1: thread j owns kept index j and walks its chunk of the reduced index
// space like an odometer (no division per element).
__global__ void sum_to_strided_kernel(const float* x, StridedLayout kept, StridedLayout reduced,
                                      int64_t kept_numel, int64_t reduced_numel,
                                      int64_t rows_per_chunk, double* partials) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= kept_numel) return;
  int64_t base = 0, rest = j;
  for (int d = kept.rank - 1; d >= 0; --d) {
    base += (rest % kept.sizes[d]) * kept.strides[0][d];
    rest /= kept.sizes[d];
  }
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(reduced_numel, r0 + rows_per_chunk);
  int64_t index[kMaxDims] = {};
  int64_t offset = 0;
  rest = r0;
  for (int d = reduced.rank - 1; d >= 0; --d) {
    index[d] = rest % reduced.sizes[d];
    rest /= reduced.sizes[d];
    offset += index[d] * reduced.strides[0][d];
  }
  double acc = 0.0;
  for (int64_t r = r0; r < r1; ++r) {
    acc += x[base + offset];
    for (int d = reduced.rank - 1; d >= 0; --d) {
      offset += reduced.strides[0][d];
      if (++index[d] < reduced.sizes[d]) break;
      offset -= reduced.sizes[d] * reduced.strides[0][d];
      index[d] = 0;
    }
  }
  partials[blockIdx.y * kept_numel + j] = acc;
}

// Pass 2: out at kept index j (out offsets from kept's operand 1) += the chunks' sum, in order.
__global__ void sum_to_finish_kernel(const double* partials, int64_t chunks, int64_t kept_numel,
                                     StridedLayout kept, float* out) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= kept_numel) return;
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partials[c * kept_numel + j];
  int64_t offset = 0, rest = j;
  for (int d = kept.rank - 1; d >= 0; --d) {
    offset += (rest % kept.sizes[d]) * kept.strides[1][d];
    rest /= kept.sizes[d];
  }
  out[offset] += static_cast<float>(total);
}

void launch_sum_to(const float* x, float* out, const SumToPlan& plan, cudaStream_t stream) {
  const int64_t kept_numel = plan.kept.numel(), reduced_numel = plan.reduced.numel();
  const ChunkPlan chunks = plan_chunks(reduced_numel, kept_numel);
  ScratchBuffer scratch(sizeof(double) * static_cast<size_t>(chunks.chunks * kept_numel), stream);
  double* partials = scratch.as<double>();
  const dim3 grid(static_cast<unsigned>(ceil_div(kept_numel, kThreadsPerBlock)),
                  static_cast<unsigned>(chunks.chunks));
  if (plan.trailing_block) {
    sum_to_columns_kernel<<<grid, kThreadsPerBlock, 0, stream>>>(x, reduced_numel, kept_numel,
                                                                 chunks.rows_per_chunk, partials);
  } else {
    sum_to_strided_kernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        x, plan.kept, plan.reduced, kept_numel, reduced_numel, chunks.rows_per_chunk, partials);
  }
  BRAID_CUDA_CHECK_LAUNCH();
  sum_to_finish_kernel<<<grid.x, kThreadsPerBlock, 0, stream>>>(partials, chunks.chunks, kept_numel,
                                                                plan.kept, out);
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sum_to(const Tensor& x, Tensor& out) {
  constexpr const char* kOp = "sum_to";
  check_cuda_tensor(x, kOp, "x");
  check_cuda_tensor(out, kOp, "out");
  check_same_device(x, out, kOp, "x", "out");
  check_writable(out, kOp, "out");
  const SumToPlan plan = plan_sum_to(x, out);  // also checks that out broadcasts to x
  if (x.numel() == 0) return;
  DeviceGuard guard(out.device().index);
  launch_sum_to(static_cast<const float*>(x.data_ptr()), static_cast<float*>(out.data_ptr()), plan,
                current_stream());
}

}  // namespace braid::cuda
