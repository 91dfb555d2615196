// CUDA cross-entropy: a block per row for the log-sum-exp, elementwise gradient from it.
#include "loss/cross_entropy.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

__global__ void cross_entropy_forward_kernel(const float* logits, const int32_t* targets,
                                             int64_t padded_cols, int64_t num_classes,
                                             int64_t ignore_index, float* losses, float* lse) {
  const int64_t row = blockIdx.x;
  const float* x = logits + row * padded_cols;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < num_classes; i += blockDim.x) mx = fmaxf(mx, x[i]);
  mx = block_max(mx);
  float total = 0.0f;
  for (int64_t i = threadIdx.x; i < num_classes; i += blockDim.x) total += expf(x[i] - mx);
  total = block_sum(total);
  if (threadIdx.x == 0) {
    const float row_lse = mx + logf(total);
    const int64_t t = targets[row];
    lse[row] = row_lse;
    if (t == ignore_index) {
      losses[row] = 0.0f;
    } else if (t < 0 || t >= num_classes) {
      losses[row] = __int_as_float(0x7fc00000);  // quiet NaN: surfaces the bad target
    } else {
      losses[row] = row_lse - x[t];
    }
  }
}

__global__ void cross_entropy_backward_kernel(const float* logits, const int32_t* targets,
                                              const float* lse, int64_t rows, int64_t padded_cols,
                                              int64_t num_classes, int64_t ignore_index,
                                              float scale, float* dlogits) {
  const int64_t n = rows * padded_cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / padded_cols, col = i - row * padded_cols;
    const int64_t t = targets[row];
    float d = 0.0f;
    if (t != ignore_index && t >= 0 && t < num_classes && col < num_classes) {
      d = expf(logits[i] - lse[row]) * scale;
      if (col == t) d -= scale;  // same two roundings as the CPU's store, then -= scale
    }
    dlogits[i] = d;
  }
}

void launch_cross_entropy_forward(const float* logits, const int32_t* targets, int64_t rows,
                                  int64_t padded_cols, int64_t num_classes, int64_t ignore_index,
                                  float* losses, float* lse, cudaStream_t stream) {
  cross_entropy_forward_kernel<<<static_cast<unsigned>(rows), row_block_threads(num_classes, 1024),
                                 0, stream>>>(logits, targets, padded_cols, num_classes,
                                              ignore_index, losses, lse);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                                   int64_t rows, int64_t padded_cols, int64_t num_classes,
                                   int64_t ignore_index, float scale, float* dlogits,
                                   cudaStream_t stream) {
  cross_entropy_backward_kernel<<<grid_1d(rows * padded_cols), kThreadsPerBlock, 0, stream>>>(
      logits, targets, lse, rows, padded_cols, num_classes, ignore_index, scale, dlogits);
  BRAID_CUDA_CHECK_LAUNCH();
}

struct Dims {
  int64_t rows, padded_cols;
};

// Shared checks: logits [N, Vp] dense, targets i32 [N] dense, 0 < num_classes <= Vp.
Dims check_common(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                  const char* op) {
  check_cuda_tensor(logits, op, "logits");
  check_cuda_tensor(targets, op, "targets", DType::i32);
  check_same_device(targets, logits, op, "targets", "logits");
  BRAID_CHECK(logits.dim() == 2, "{} (cuda): logits must be [N, Vpad], got {}", op, logits.str());
  check_contiguous(logits, op, "logits");
  check_contiguous(targets, op, "targets");
  const int64_t rows = logits.size(0), padded_cols = logits.size(1);
  check_shape(targets, {rows}, op, "targets");
  BRAID_CHECK(num_classes > 0 && num_classes <= padded_cols,
              "{} (cuda): num_classes {} must be in [1, {}] (the logits' columns)", op, num_classes,
              padded_cols);
  check_fits_int(rows, op, "rows (grid size)");
  return {rows, padded_cols};
}

void check_row_vector(const Tensor& t, const Tensor& logits, int64_t rows, const char* op,
                      const char* role) {
  check_cuda_tensor(t, op, role);
  check_same_device(t, logits, op, role, "logits");
  check_contiguous(t, op, role);
  check_shape(t, {rows}, op, role);
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                           int64_t ignore_index, Tensor& losses, Tensor& lse) {
  constexpr const char* kOp = "cross_entropy_forward";
  const Dims dims = check_common(logits, targets, num_classes, kOp);
  check_row_vector(losses, logits, dims.rows, kOp, "losses");
  check_row_vector(lse, logits, dims.rows, kOp, "lse");
  if (dims.rows == 0) return;
  DeviceGuard guard(logits.device().index);
  launch_cross_entropy_forward(static_cast<const float*>(logits.data_ptr()),
                               static_cast<const int32_t*>(targets.data_ptr()), dims.rows,
                               dims.padded_cols, num_classes, ignore_index,
                               static_cast<float*>(losses.data_ptr()),
                               static_cast<float*>(lse.data_ptr()), current_stream());
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            int64_t num_classes, int64_t ignore_index, float scale,
                            Tensor& dlogits) {
  constexpr const char* kOp = "cross_entropy_backward";
  const Dims dims = check_common(logits, targets, num_classes, kOp);
  check_row_vector(lse, logits, dims.rows, kOp, "lse");
  check_dense_like(dlogits, logits, kOp, "dlogits", "logits");
  if (dims.rows == 0 || dims.padded_cols == 0) return;
  DeviceGuard guard(logits.device().index);
  launch_cross_entropy_backward(
      static_cast<const float*>(logits.data_ptr()), static_cast<const int32_t*>(targets.data_ptr()),
      static_cast<const float*>(lse.data_ptr()), dims.rows, dims.padded_cols, num_classes,
      ignore_index, scale, static_cast<float*>(dlogits.data_ptr()), current_stream());
}

}  // namespace braid::cuda
