// CUDA GEMM: operand layout planning and cuBLAS strided-batched SGEMM calls.
#include "gemm/gemm.cuh"

#include <algorithm>
#include <mutex>
#include <vector>

#include "braid/ops/gemm_layout.h"
#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

using ops::as_row_major;
using ops::RowMajorOperand;

// One handle per device, created on first use and kept for the process: destroying handles at
// exit races the runtime's own teardown. Bound to braid's stream once, at creation.
cublasHandle_t cublas_handle(int device_index) {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<int>(handles.size()) <= device_index) handles.resize(device_index + 1, nullptr);
  cublasHandle_t& handle = handles[device_index];
  if (handle == nullptr) {
    cublasHandle_t created = nullptr;
    BRAID_CUBLAS_CHECK(cublasCreate(&created));
    // Plain FP32 (no TF32 tensor cores): results stay comparable with the CPU's sgemm.
    BRAID_CUBLAS_CHECK(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH));
    BRAID_CUBLAS_CHECK(cublasSetStream(created, current_stream()));
    handle = created;
  }
  return handle;
}

void launch_gemm(const GemmPlan& plan, const float* a, const float* b, float alpha, float beta,
                 float* c, int device_index) {
  cublasHandle_t handle = cublas_handle(device_index);
  const StridedLayout& batch = plan.batch;
  // The innermost merged batch dim goes to cuBLAS as a strided batch; outer ones are looped.
  const int inner = batch.rank - 1;
  const int64_t count = batch.rank > 0 ? batch.sizes[inner] : 1;
  const int64_t stride_a = batch.rank > 0 ? batch.strides[0][inner] : 0;
  const int64_t stride_b = batch.rank > 0 ? batch.strides[1][inner] : 0;
  const int64_t stride_c = batch.rank > 0 ? batch.strides[2][inner] : 0;
  int64_t outer = 1;
  for (int d = 0; d < inner; ++d) outer *= batch.sizes[d];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rest = o, oa = 0, ob = 0, oc = 0;
    for (int d = inner - 1; d >= 0; --d) {
      const int64_t idx = rest % batch.sizes[d];
      rest /= batch.sizes[d];
      oa += idx * batch.strides[0][d];
      ob += idx * batch.strides[1][d];
      oc += idx * batch.strides[2][d];
    }
    BRAID_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, plan.blas_trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        plan.blas_trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(plan.n),
        static_cast<int>(plan.m), static_cast<int>(plan.k), &alpha, b + ob,
        static_cast<int>(plan.ldb), stride_b, a + oa, static_cast<int>(plan.lda), stride_a, &beta,
        c + oc, static_cast<int>(plan.ldc), stride_c, static_cast<int>(count)));
  }
}

}  // namespace

GemmPlan plan_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c) {
  constexpr const char* kOp = "gemm";
  BRAID_CHECK(a.dim() >= 2 && b.dim() >= 2 && c.dim() >= 2,
              "{} (cuda): operands must be matrices (or batches of them), got {}, {} -> {}", kOp,
              a.str(), b.str(), c.str());
  GemmPlan plan;
  plan.m = c.size(-2);
  plan.n = c.size(-1);
  plan.k = trans_a ? a.size(-2) : a.size(-1);
  BRAID_CHECK((trans_a ? a.size(-1) : a.size(-2)) == plan.m &&
                  (trans_b ? b.size(-1) : b.size(-2)) == plan.k &&
                  (trans_b ? b.size(-2) : b.size(-1)) == plan.n,
              "{} (cuda): shapes do not chain: {}{} @ {}{} -> {}", kOp, a.str(),
              trans_a ? "^T" : "", b.str(), trans_b ? "^T" : "", c.str());
  BRAID_CHECK(c.stride(-1) == 1 || plan.n == 1,
              "{} (cuda): output {} needs unit stride in its last dim, got strides {}", kOp,
              c.str(), shape_str(c.strides()));
  const RowMajorOperand ra =
      as_row_major(a.size(-2), a.size(-1), a.stride(-2), a.stride(-1), trans_a, "a");
  const RowMajorOperand rb =
      as_row_major(b.size(-2), b.size(-1), b.stride(-2), b.stride(-1), trans_b, "b");
  plan.blas_trans_a = ra.transposed;
  plan.blas_trans_b = rb.transposed;
  plan.lda = ra.ld;
  plan.ldb = rb.ld;
  plan.ldc = plan.m > 1 ? c.stride(-2) : std::max<int64_t>(plan.n, 1);
  BRAID_CHECK(plan.ldc >= std::max<int64_t>(plan.n, 1),
              "{} (cuda): output {} rows overlap (row stride {} < {} columns)", kOp, c.str(),
              plan.ldc, plan.n);
  for (int64_t v : {plan.m, plan.n, plan.k, plan.lda, plan.ldb, plan.ldc})
    check_fits_int(v, kOp, "a matrix dimension or leading dimension");

  // Batch dims: c's leading dims; a and b share them exactly or are plain matrices.
  const int batch_dims = c.dim() - 2;
  const Shape batch_shape(c.shape().begin(), c.shape().begin() + batch_dims);
  const Shape zeros(batch_dims, 0);
  auto batch_strides = [&](const Tensor& t, const char* role) {
    if (t.dim() == 2) return zeros;
    BRAID_CHECK(t.dim() == c.dim() &&
                    Shape(t.shape().begin(), t.shape().begin() + batch_dims) == batch_shape,
                "{} (cuda): {} {} must be a matrix or have the output's batch dims {}", kOp, role,
                t.str(), shape_str(batch_shape));
    return Shape(t.strides().begin(), t.strides().begin() + batch_dims);
  };
  const Shape sa = batch_strides(a, "a"), sb = batch_strides(b, "b");
  const Shape sc(c.strides().begin(), c.strides().begin() + batch_dims);
  const Shape* strides[] = {&sa, &sb, &sc};
  plan.batch = collapse_layout(batch_shape, strides, 3);
  if (plan.batch.rank > 0)
    check_fits_int(plan.batch.sizes[plan.batch.rank - 1], kOp, "batch count");
  return plan;
}

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha, float beta,
          Tensor& c) {
  constexpr const char* kOp = "gemm";
  check_cuda_tensor(a, kOp, "a");
  check_cuda_tensor(b, kOp, "b");
  check_cuda_tensor(c, kOp, "c");
  check_same_device(a, c, kOp, "a", "c");
  check_same_device(b, c, kOp, "b", "c");
  check_writable(c, kOp, "c");
  const GemmPlan plan = plan_gemm(a, trans_a, b, trans_b, c);
  if (plan.m == 0 || plan.n == 0 || plan.batch.numel() == 0) return;
  DeviceGuard guard(c.device().index);
  launch_gemm(plan, static_cast<const float*>(a.data_ptr()),
              static_cast<const float*>(b.data_ptr()), alpha, beta,
              static_cast<float*>(c.data_ptr()), c.device().index);
}

}  // namespace braid::cuda
