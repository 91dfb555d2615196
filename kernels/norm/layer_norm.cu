// CUDA layer norm: per-row statistics forward; backward with deterministic weight gradients.
#include "norm/layer_norm.cuh"

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

// Two passes over the row (mean, then squared deviations) like the CPU kernel: more accurate
// than E[x^2] - E[x]^2 when the mean is large.
__global__ void layer_norm_forward_kernel(const float* x, const float* w, const float* b, float eps,
                                          int64_t cols, float* y, float* mean, float* rstd) {
  const int64_t row = blockIdx.x;
  const float* in = x + row * cols;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += in[i];
  const float m = block_sum(s) / static_cast<float>(cols);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) var += (in[i] - m) * (in[i] - m);
  const float rs = 1.0f / sqrtf(block_sum(var) / static_cast<float>(cols) + eps);
  float* out = y + row * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[i] = (in[i] - m) * rs * w[i] + b[i];
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

__global__ void layer_norm_backward_dx_kernel(const float* x, const float* w, const float* mean,
                                              const float* rstd, const float* dy, int64_t cols,
                                              float* dx) {
  const int64_t row = blockIdx.x;
  const float* in = x + row * cols;
  const float* g = dy + row * cols;
  const float m = mean[row], rs = rstd[row];
  float sum_g = 0.0f, sum_g_xhat = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float xhat = (in[i] - m) * rs;
    const float gw = g[i] * w[i];
    sum_g += gw;
    sum_g_xhat += gw * xhat;
  }
  sum_g = block_sum(sum_g);
  sum_g_xhat = block_sum(sum_g_xhat);
  const float inv_c = 1.0f / static_cast<float>(cols);
  float* out = dx + row * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float xhat = (in[i] - m) * rs;
    out[i] = rs * (g[i] * w[i] - inv_c * (sum_g + xhat * sum_g_xhat));
  }
}

// Pass 1 of dweight/dbias: block (bx, chunk) sums dy * xhat and dy over its chunk's rows for its
// columns (adjacent threads, adjacent columns: coalesced).
__global__ void layer_norm_backward_partials_kernel(const float* x, const float* mean,
                                                    const float* rstd, const float* dy,
                                                    int64_t rows, int64_t cols,
                                                    int64_t rows_per_chunk, float* partial_w,
                                                    float* partial_b) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float dw = 0.0f, db = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const float g = dy[r * cols + c];
    dw += g * ((x[r * cols + c] - mean[r]) * rstd[r]);
    db += g;
  }
  partial_w[blockIdx.y * cols + c] = dw;
  partial_b[blockIdx.y * cols + c] = db;
}

// Pass 2: the chunks' partials summed in chunk order (in double: the chunks can be many).
__global__ void layer_norm_backward_finish_kernel(const float* partial_w, const float* partial_b,
                                                  int64_t chunks, int64_t cols, float* dweight,
                                                  float* dbias) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  double dw = 0.0, db = 0.0;
  for (int64_t k = 0; k < chunks; ++k) {
    dw += partial_w[k * cols + c];
    db += partial_b[k * cols + c];
  }
  dweight[c] = static_cast<float>(dw);
  dbias[c] = static_cast<float>(db);
}

void launch_layer_norm_forward(const float* x, const float* w, const float* b, float eps,
                               int64_t rows, int64_t cols, float* y, float* mean, float* rstd,
                               cudaStream_t stream) {
  layer_norm_forward_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0, stream>>>(
      x, w, b, eps, cols, y, mean, rstd);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward(const float* x, const float* w, const float* mean,
                                const float* rstd, const float* dy, int64_t rows, int64_t cols,
                                float* dx, float* dweight, float* dbias, cudaStream_t stream) {
  if (rows > 0) {
    layer_norm_backward_dx_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0,
                                    stream>>>(x, w, mean, rstd, dy, cols, dx);
    BRAID_CUDA_CHECK_LAUNCH();
  }
  const ChunkPlan plan = plan_chunks(rows, cols);
  ScratchBuffer scratch(sizeof(float) * 2 * static_cast<size_t>(plan.chunks * cols), stream);
  float* partial_w = scratch.as<float>();
  float* partial_b = partial_w + plan.chunks * cols;
  const unsigned col_blocks = static_cast<unsigned>(ceil_div(cols, kThreadsPerBlock));
  if (rows > 0) {
    const dim3 grid(col_blocks, static_cast<unsigned>(plan.chunks));
    layer_norm_backward_partials_kernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        x, mean, rstd, dy, rows, cols, plan.rows_per_chunk, partial_w, partial_b);
    BRAID_CUDA_CHECK_LAUNCH();
  } else {
    // No rows: the gradients are zero sums (the finish pass reads one zeroed chunk).
    BRAID_CUDA_CHECK(cudaMemsetAsync(partial_w, 0, sizeof(float) * 2 * cols, stream));
  }
  layer_norm_backward_finish_kernel<<<col_blocks, kThreadsPerBlock, 0, stream>>>(
      partial_w, partial_b, plan.chunks, cols, dweight, dbias);
  BRAID_CUDA_CHECK_LAUNCH();
}

struct RowsCols {
  int64_t rows, cols;
};

RowsCols check_matrix(const Tensor& x, const char* op) {
  BRAID_CHECK(x.dim() == 2, "{} (cuda): x must be [N, C], got {}", op, x.str());
  check_contiguous(x, op, "x");
  check_fits_int(x.size(0), op, "rows (grid size)");
  return {x.size(0), x.size(1)};
}

// Checks t is a dense f32 cuda tensor of `shape` on x's device.
void check_like(const Tensor& t, const Tensor& x, const Shape& shape, const char* op,
                const char* role) {
  check_cuda_tensor(t, op, role);
  check_same_device(t, x, op, role, "x");
  check_contiguous(t, op, role);
  check_shape(t, shape, op, role);
}

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd) {
  constexpr const char* kOp = "layer_norm_forward";
  check_cuda_tensor(x, kOp, "x");
  const auto [rows, cols] = check_matrix(x, kOp);
  check_like(weight, x, {cols}, kOp, "weight");
  check_like(bias, x, {cols}, kOp, "bias");
  check_like(y, x, x.shape(), kOp, "y");
  check_like(mean, x, {rows}, kOp, "mean");
  check_like(rstd, x, {rows}, kOp, "rstd");
  BRAID_CHECK(cols > 0 || rows == 0, "layer_norm_forward (cuda): rows of zero features");
  if (rows == 0) return;
  DeviceGuard guard(x.device().index);
  launch_layer_norm_forward(static_cast<const float*>(x.data_ptr()),
                            static_cast<const float*>(weight.data_ptr()),
                            static_cast<const float*>(bias.data_ptr()), eps, rows, cols,
                            static_cast<float*>(y.data_ptr()), static_cast<float*>(mean.data_ptr()),
                            static_cast<float*>(rstd.data_ptr()), current_stream());
}

void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dweight,
                         Tensor& dbias) {
  constexpr const char* kOp = "layer_norm_backward";
  check_cuda_tensor(x, kOp, "x");
  const auto [rows, cols] = check_matrix(x, kOp);
  check_like(weight, x, {cols}, kOp, "weight");
  check_like(mean, x, {rows}, kOp, "mean");
  check_like(rstd, x, {rows}, kOp, "rstd");
  check_like(dy, x, x.shape(), kOp, "dy");
  check_like(dx, x, x.shape(), kOp, "dx");
  check_like(dweight, x, {cols}, kOp, "dweight");
  check_like(dbias, x, {cols}, kOp, "dbias");
  if (cols == 0) return;
  DeviceGuard guard(x.device().index);
  launch_layer_norm_backward(
      static_cast<const float*>(x.data_ptr()), static_cast<const float*>(weight.data_ptr()),
      static_cast<const float*>(mean.data_ptr()), static_cast<const float*>(rstd.data_ptr()),
      static_cast<const float*>(dy.data_ptr()), rows, cols, static_cast<float*>(dx.data_ptr()),
      static_cast<float*>(dweight.data_ptr()), static_cast<float*>(dbias.data_ptr()),
      current_stream());
}

}  // namespace braid::cuda
