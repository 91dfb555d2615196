// CUDA vocabulary-parallel cross-entropy and embedding lookup: a block per row for the max and
// the exp-sum; elementwise target and id mapping, losses and gradient from the global lse.
#include "loss/vocab_parallel_cross_entropy.cuh"

#include "braid/ops/kernel_signatures.h"
#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Whether a row's target is one of this piece's classes. Padding columns and unknown
// negative values are not: they must never be read as a target.
__device__ __forceinline__ bool local_target(int64_t t, int64_t valid) {
  return t >= 0 && t < valid;
}

__device__ __forceinline__ bool known_target(int64_t t, int64_t valid) {
  return local_target(t, valid) || t == ops::kTargetElsewhere || t == ops::kTargetIgnored;
}

__global__ void vocab_shard_max_kernel(const float* logits, int64_t cols, int64_t valid,
                                       float* row_max) {
  const int64_t row = blockIdx.x;
  const float* x = logits + row * cols;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < valid; i += blockDim.x) mx = fmaxf(mx, x[i]);
  mx = block_max(mx);
  if (threadIdx.x == 0) row_max[row] = mx;
}

__global__ void vocab_shard_sum_exp_kernel(const float* logits, const int32_t* targets,
                                           int64_t cols, int64_t valid, const float* row_max,
                                           float* sum_exp, float* target_logit) {
  const int64_t row = blockIdx.x;
  const float* x = logits + row * cols;
  const float mx = row_max[row];
  float total = 0.0f;
  for (int64_t i = threadIdx.x; i < valid; i += blockDim.x) total += expf(x[i] - mx);
  total = block_sum(total);
  if (threadIdx.x == 0) {
    const int64_t t = targets[row];
    sum_exp[row] = total;
    if (local_target(t, valid)) {
      target_logit[row] = x[t];
    } else if (known_target(t, valid)) {
      target_logit[row] = 0.0f;  // the sum over ranks then holds the owner's logit alone
    } else {
      target_logit[row] = __int_as_float(0x7fc00000);  // quiet NaN: surfaces the bad target
    }
  }
}

__global__ void vocab_shard_backward_kernel(const float* logits, const int32_t* targets,
                                            const float* lse, int64_t rows, int64_t cols,
                                            int64_t valid, float scale, float* dlogits) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / cols, col = i - row * cols;
    const int64_t t = targets[row];
    float d = 0.0f;
    if ((local_target(t, valid) || t == ops::kTargetElsewhere) && col < valid) {
      d = expf(logits[i] - lse[row]) * scale;
      if (col == t) d -= scale;  // same two roundings as the CPU's store, then -= scale
    }
    dlogits[i] = d;
  }
}

__global__ void vocab_shard_targets_kernel(const int32_t* targets, int64_t n, int64_t begin,
                                           int64_t valid, int64_t ignore_index, int32_t* local) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t column = static_cast<int64_t>(targets[i]) - begin;
    local[i] = targets[i] == ignore_index      ? ops::kTargetIgnored
               : column >= 0 && column < valid ? static_cast<int32_t>(column)
                                               : ops::kTargetElsewhere;
  }
}

__global__ void vocab_shard_loss_kernel(const float* row_max, const float* sum_exp,
                                        const float* target_logit, const int32_t* local_targets,
                                        int64_t rows, float* lse, float* losses) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float l = row_max[r] + logf(sum_exp[r]);
    lse[r] = l;
    losses[r] = local_targets[r] == ops::kTargetIgnored ? 0.0f : l - target_logit[r];
  }
}

__global__ void vocab_shard_ids_kernel(const int32_t* ids, int64_t n, int64_t begin, int64_t rows,
                                       int32_t* local, float* mask) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = static_cast<int64_t>(ids[i]) - begin;
    const bool mine = row >= 0 && row < rows;
    local[i] = mine ? static_cast<int32_t>(row) : 0;
    mask[i] = mine ? 1.0f : 0.0f;
  }
}

void launch_vocab_shard_max(const float* logits, int64_t rows, int64_t cols, int64_t valid,
                            float* row_max, cudaStream_t stream) {
  vocab_shard_max_kernel<<<static_cast<unsigned>(rows), row_block_threads(valid, 1024), 0,
                           stream>>>(logits, cols, valid, row_max);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_vocab_shard_sum_exp(const float* logits, const int32_t* targets, int64_t rows,
                                int64_t cols, int64_t valid, const float* row_max, float* sum_exp,
                                float* target_logit, cudaStream_t stream) {
  vocab_shard_sum_exp_kernel<<<static_cast<unsigned>(rows), row_block_threads(valid, 1024), 0,
                               stream>>>(logits, targets, cols, valid, row_max, sum_exp,
                                         target_logit);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_vocab_shard_backward(const float* logits, const int32_t* targets, const float* lse,
                                 int64_t rows, int64_t cols, int64_t valid, float scale,
                                 float* dlogits, cudaStream_t stream) {
  vocab_shard_backward_kernel<<<grid_1d(rows * cols), kThreadsPerBlock, 0, stream>>>(
      logits, targets, lse, rows, cols, valid, scale, dlogits);
  BRAID_CUDA_CHECK_LAUNCH();
}

struct Dims {
  int64_t rows, cols;
};

// logits [N, Vs] dense with 0 <= valid <= Vs; valid == 0 is a piece holding only padding
// (the last ranks when the vocabulary does not fill every piece).
Dims check_logits(const Tensor& logits, int64_t valid, const char* op) {
  check_cuda_tensor(logits, op, "logits");
  BRAID_CHECK(logits.dim() == 2, "{} (cuda): logits must be [N, Vs], got {}", op, logits.str());
  check_contiguous(logits, op, "logits");
  const int64_t rows = logits.size(0), cols = logits.size(1);
  BRAID_CHECK(valid >= 0 && valid <= cols,
              "{} (cuda): valid {} must be in [0, {}] (the logits' columns)", op, valid, cols);
  check_fits_int(rows, op, "rows (grid size)");
  return {rows, cols};
}

void check_targets(const Tensor& targets, const Tensor& logits, int64_t rows, const char* op) {
  check_cuda_tensor(targets, op, "targets", DType::i32);
  check_same_device(targets, logits, op, "targets", "logits");
  check_contiguous(targets, op, "targets");
  check_shape(targets, {rows}, op, "targets");
}

void check_row_vector(const Tensor& t, const Tensor& logits, int64_t rows, const char* op,
                      const char* role) {
  check_cuda_tensor(t, op, role);
  check_same_device(t, logits, op, role, "logits");
  check_contiguous(t, op, role);
  check_shape(t, {rows}, op, role);
}

// An i32 output with ref's shape, dense on ref's device.
void check_i32_like(const Tensor& t, const Tensor& ref, const char* op, const char* role,
                    const char* ref_role) {
  check_cuda_tensor(t, op, role, DType::i32);
  check_same_device(t, ref, op, role, ref_role);
  check_contiguous(t, op, role);
  check_shape(t, ref.shape(), op, role);
}

}  // namespace

void vocab_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max) {
  constexpr const char* kOp = "vocab_shard_max";
  const Dims dims = check_logits(logits, valid, kOp);
  check_row_vector(row_max, logits, dims.rows, kOp, "row_max");
  if (dims.rows == 0) return;
  DeviceGuard guard(logits.device().index);
  launch_vocab_shard_max(static_cast<const float*>(logits.data_ptr()), dims.rows, dims.cols, valid,
                         static_cast<float*>(row_max.data_ptr()), current_stream());
}

void vocab_shard_sum_exp(const Tensor& logits, const Tensor& targets, int64_t valid,
                         const Tensor& row_max, Tensor& sum_exp, Tensor& target_logit) {
  constexpr const char* kOp = "vocab_shard_sum_exp";
  const Dims dims = check_logits(logits, valid, kOp);
  check_targets(targets, logits, dims.rows, kOp);
  check_row_vector(row_max, logits, dims.rows, kOp, "row_max");
  check_row_vector(sum_exp, logits, dims.rows, kOp, "sum_exp");
  check_row_vector(target_logit, logits, dims.rows, kOp, "target_logit");
  if (dims.rows == 0) return;
  DeviceGuard guard(logits.device().index);
  launch_vocab_shard_sum_exp(static_cast<const float*>(logits.data_ptr()),
                             static_cast<const int32_t*>(targets.data_ptr()), dims.rows, dims.cols,
                             valid, static_cast<const float*>(row_max.data_ptr()),
                             static_cast<float*>(sum_exp.data_ptr()),
                             static_cast<float*>(target_logit.data_ptr()), current_stream());
}

void vocab_shard_backward(const Tensor& logits, const Tensor& targets, int64_t valid,
                          const Tensor& lse, float scale, Tensor& dlogits) {
  constexpr const char* kOp = "vocab_shard_backward";
  const Dims dims = check_logits(logits, valid, kOp);
  check_targets(targets, logits, dims.rows, kOp);
  check_row_vector(lse, logits, dims.rows, kOp, "lse");
  check_dense_like(dlogits, logits, kOp, "dlogits", "logits");
  if (dims.rows == 0 || dims.cols == 0) return;
  DeviceGuard guard(logits.device().index);
  launch_vocab_shard_backward(
      static_cast<const float*>(logits.data_ptr()), static_cast<const int32_t*>(targets.data_ptr()),
      static_cast<const float*>(lse.data_ptr()), dims.rows, dims.cols, valid, scale,
      static_cast<float*>(dlogits.data_ptr()), current_stream());
}

void vocab_shard_targets(const Tensor& targets, int64_t begin, int64_t valid, int64_t ignore_index,
                         Tensor& local) {
  constexpr const char* kOp = "vocab_shard_targets";
  check_cuda_tensor(targets, kOp, "targets", DType::i32);
  check_contiguous(targets, kOp, "targets");
  check_i32_like(local, targets, kOp, "local", "targets");
  const int64_t n = targets.numel();
  if (n == 0) return;
  DeviceGuard guard(targets.device().index);
  vocab_shard_targets_kernel<<<grid_1d(n), kThreadsPerBlock, 0, current_stream()>>>(
      static_cast<const int32_t*>(targets.data_ptr()), n, begin, valid, ignore_index,
      static_cast<int32_t*>(local.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

void vocab_shard_loss(const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                      const Tensor& local_targets, Tensor& lse, Tensor& losses) {
  constexpr const char* kOp = "vocab_shard_loss";
  check_cuda_tensor(row_max, kOp, "row_max");
  BRAID_CHECK(row_max.dim() == 1, "{} (cuda): row_max must be [N], got {}", kOp, row_max.str());
  check_contiguous(row_max, kOp, "row_max");
  const int64_t rows = row_max.numel();
  check_row_vector(sum_exp, row_max, rows, kOp, "sum_exp");
  check_row_vector(target_logit, row_max, rows, kOp, "target_logit");
  check_targets(local_targets, row_max, rows, kOp);
  check_row_vector(lse, row_max, rows, kOp, "lse");
  check_row_vector(losses, row_max, rows, kOp, "losses");
  if (rows == 0) return;
  DeviceGuard guard(row_max.device().index);
  vocab_shard_loss_kernel<<<grid_1d(rows), kThreadsPerBlock, 0, current_stream()>>>(
      static_cast<const float*>(row_max.data_ptr()), static_cast<const float*>(sum_exp.data_ptr()),
      static_cast<const float*>(target_logit.data_ptr()),
      static_cast<const int32_t*>(local_targets.data_ptr()), rows,
      static_cast<float*>(lse.data_ptr()), static_cast<float*>(losses.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

void vocab_shard_ids(const Tensor& ids, int64_t begin, int64_t rows, Tensor& local, Tensor& mask) {
  constexpr const char* kOp = "vocab_shard_ids";
  check_cuda_tensor(ids, kOp, "ids", DType::i32);
  check_contiguous(ids, kOp, "ids");
  check_i32_like(local, ids, kOp, "local", "ids");
  check_cuda_tensor(mask, kOp, "mask");
  check_same_device(mask, ids, kOp, "mask", "ids");
  check_contiguous(mask, kOp, "mask");
  check_shape(mask, ids.shape(), kOp, "mask");
  const int64_t n = ids.numel();
  if (n == 0) return;
  DeviceGuard guard(ids.device().index);
  vocab_shard_ids_kernel<<<grid_1d(n), kThreadsPerBlock, 0, current_stream()>>>(
      static_cast<const int32_t*>(ids.data_ptr()), n, begin, rows,
      static_cast<int32_t*>(local.data_ptr()), static_cast<float*>(mask.data_ptr()));
  BRAID_CUDA_CHECK_LAUNCH();
}

}  // namespace braid::cuda
