// Argument checks shared by the CUDA kernel entries (host code only).
#include "tensor_checks.h"

#include <limits>

namespace braid::cuda {

void check_cuda_tensor(const Tensor& t, const char* op, const char* role, DType dtype) {
  BRAID_CHECK(t.defined(), "{} (cuda): {} is an undefined tensor", op, role);
  BRAID_CHECK(t.dtype() == dtype, "{} (cuda): {} must be {}, got {}", op, role, dtype_name(dtype),
              t.str());
  BRAID_CHECK(t.device().kind == DeviceKind::cuda,
              "{} (cuda): {} must be on a cuda device, got {} on {}", op, role, t.str(),
              t.device().str());
}

void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* role,
                       const char* ref_role) {
  BRAID_CHECK(t.device() == ref.device(), "{} (cuda): {} is on {} but {} is on {}", op, role,
              t.device().str(), ref_role, ref.device().str());
}

void check_dense_like(const Tensor& t, const Tensor& ref, const char* op, const char* role,
                      const char* ref_role) {
  check_cuda_tensor(t, op, role);
  check_same_device(t, ref, op, role, ref_role);
  check_contiguous(t, op, role);
  check_shape(t, ref.shape(), op, role);
}

void check_contiguous(const Tensor& t, const char* op, const char* role) {
  BRAID_CHECK(t.is_contiguous(), "{} (cuda): {} {} must be contiguous, got strides {}", op, role,
              t.str(), shape_str(t.strides()));
}

void check_shape(const Tensor& t, const Shape& shape, const char* op, const char* role) {
  BRAID_CHECK(t.shape() == shape, "{} (cuda): {} must have shape {}, got {}", op, role,
              shape_str(shape), t.str());
}

void check_unit_inner(const Tensor& t, const char* op, const char* role) {
  BRAID_CHECK(t.dim() >= 1 && (t.stride(-1) == 1 || t.size(-1) == 1),
              "{} (cuda): {} {} needs unit stride in its last dim, got strides {}", op, role,
              t.str(), shape_str(t.strides()));
}

void check_writable(const Tensor& t, const char* op, const char* role) {
  for (int d = 0; d < t.dim(); ++d)
    BRAID_CHECK(t.shape()[d] <= 1 || t.strides()[d] != 0,
                "{} (cuda): output {} {} has a zero stride in dim {} (a broadcast view cannot be "
                "written)",
                op, role, t.str(), d);
}

void check_fits_int(int64_t value, const char* op, const char* what) {
  BRAID_CHECK(value >= 0 && value <= std::numeric_limits<int>::max(),
              "{} (cuda): {} = {} does not fit a 32-bit int", op, what, value);
}

}  // namespace braid::cuda
