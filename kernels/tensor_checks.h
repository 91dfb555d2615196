// Argument checks every CUDA kernel entry runs before launching: dtype, device, layout, shape.
//
// Plain C++; each failure is a braid::Error naming the op, the argument's role and what was
// wrong, e.g. "gelu_forward (cuda): x must be on a cuda device, got f32[4, 8] on cpu".
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// t is defined, has dtype `dtype` and lives on a cuda device.
void check_cuda_tensor(const Tensor& t, const char* op, const char* role, DType dtype = DType::f32);
// t lives on the same device as `ref` (kernels never read across devices).
void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* role,
                       const char* ref_role);
// t is dense in row-major order.
void check_contiguous(const Tensor& t, const char* op, const char* role);
// t has exactly `shape`.
void check_shape(const Tensor& t, const Shape& shape, const char* op, const char* role);
// t is a dense f32 cuda tensor on ref's device with ref's shape: the companion arguments
// (gradients, outputs) of an elementwise kernel. The four checks above, in that order.
void check_dense_like(const Tensor& t, const Tensor& ref, const char* op, const char* role,
                      const char* ref_role);
// t's last dim has unit stride (or size 1).
void check_unit_inner(const Tensor& t, const char* op, const char* role);
// No two elements of t share memory through a zero stride (t is written to).
void check_writable(const Tensor& t, const char* op, const char* role);
// `value` fits the 32-bit ints a launch or a library call takes.
void check_fits_int(int64_t value, const char* op, const char* what);

}  // namespace braid::cuda
