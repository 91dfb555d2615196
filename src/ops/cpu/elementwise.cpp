// CPU elementwise kernels: broadcasting binary ops, affine maps and reductions.
#include <omp.h>

#include <algorithm>
#include <array>
#include <tuple>
#include <vector>

#include "core/strided.h"
#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;  // below this, threads cost more than they save

template <BinaryOp Op>
inline float apply(float a, float b) {
  if constexpr (Op == BinaryOp::add) return a + b;
  if constexpr (Op == BinaryOp::sub) return a - b;
  if constexpr (Op == BinaryOp::mul) return a * b;
  if constexpr (Op == BinaryOp::div) return a / b;
}

template <BinaryOp Op>
void binary_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  const float* pa = static_cast<const float*>(a.storage()->data()) + a.offset();
  const float* pb = static_cast<const float*>(b.storage()->data()) + b.offset();
  float* po = static_cast<float*>(out.storage()->data()) + out.offset();
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {
#pragma omp parallel for simd if (parallel : n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) po[i] = apply<Op>(pa[i], pb[i]);
    return;
  }
  const Shape& shape = out.shape();
  const int64_t rows = detail::num_rows(shape), len = detail::row_length(shape);
  const int64_t sa = shape.empty() ? 0 : a.strides().back();
  const int64_t sb = shape.empty() ? 0 : b.strides().back();
  const int64_t so = shape.empty() ? 0 : out.strides().back();
  const Shape &ta = a.strides(), &tb = b.strides(), &to = out.strides();
#pragma omp parallel if (n > kParallelThreshold)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    detail::for_each_row<3>(shape, {&ta, &tb, &to}, rows * t / nt, rows * (t + 1) / nt,
                            [&](int64_t, int64_t oa, int64_t ob, int64_t oo) {
                              const float* ra = pa + oa;
                              const float* rb = pb + ob;
                              float* ro = po + oo;
                              if (sa == 1 && sb == 1 && so == 1) {
                                for (int64_t i = 0; i < len; ++i) ro[i] = apply<Op>(ra[i], rb[i]);
                              } else if (sa == 1 && sb == 0 && so == 1) {
                                const float v = rb[0];
                                for (int64_t i = 0; i < len; ++i) ro[i] = apply<Op>(ra[i], v);
                              } else {
                                for (int64_t i = 0; i < len; ++i)
                                  ro[i * so] = apply<Op>(ra[i * sa], rb[i * sb]);
                              }
                            });
  }
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  switch (op) {
    case BinaryOp::add:
      return binary_impl<BinaryOp::add>(a, b, out);
    case BinaryOp::sub:
      return binary_impl<BinaryOp::sub>(a, b, out);
    case BinaryOp::mul:
      return binary_impl<BinaryOp::mul>(a, b, out);
    case BinaryOp::div:
      return binary_impl<BinaryOp::div>(a, b, out);
  }
}

void affine(const Tensor& x, float alpha, float beta, Tensor& out) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* po = out.data<float>();
#pragma omp parallel for simd if (parallel : n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) po[i] = alpha * px[i] + beta;
}

void sum(const Tensor& x, double* total, double* total_squares) {
  const int64_t n = x.numel();
  const float* p = x.data<float>();
  // Float partial sums over short blocks vectorise; adding the blocks in double keeps the
  // result accurate for hundreds of millions of elements (gradient norms of a full model).
  constexpr int64_t kBlock = 256;
  double s = 0, sq = 0;
#pragma omp parallel for reduction(+ : s, sq) schedule(static) if (n > kParallelThreshold)
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    float bs = 0, bsq = 0;
#pragma omp simd reduction(+ : bs, bsq)
    for (int64_t i = b; i < e; ++i) {
      bs += p[i];
      bsq += p[i] * p[i];
    }
    s += bs;
    sq += bsq;
  }
  *total = s;
  *total_squares = sq;
}

void sum_to(const Tensor& x, Tensor& out) {
  // Align out's dims to x's (leading missing dims are broadcast) and give broadcast dims stride 0.
  const Shape& xs = x.shape();
  const int lead = x.dim() - out.dim();
  Shape ostrides(xs.size(), 0);
  int64_t kept_trailing = 1;
  int first_kept_suffix = x.dim();  // out equals x's shape on dims [first_kept_suffix, end)
  for (int d = x.dim() - 1; d >= 0; --d) {
    const int od = d - lead;
    const bool kept = od >= 0 && out.shape()[od] == xs[d];
    if (kept && out.shape()[od] != 1) ostrides[d] = out.strides()[od];
    if (kept && first_kept_suffix == d + 1) {
      first_kept_suffix = d;
      kept_trailing *= xs[d];
    }
  }
  const float* px = x.data<float>();
  float* po = out.data<float>();
  if (kept_trailing == out.numel()) {
    // Common case (bias and position gradients): out is x's trailing block; sum the leading
    // rows column by column, columns split across threads so no two threads share a sum.
    const int64_t rows = x.numel() / std::max<int64_t>(kept_trailing, 1);
    const int64_t cols = kept_trailing;
#pragma omp parallel if (x.numel() > kParallelThreshold)
    {
      // Each thread owns a column range and walks the rows in memory order (double sums).
      const int nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t c0 = cols * t / nt, c1 = cols * (t + 1) / nt;
      std::vector<double> acc(c1 - c0, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = px + r * cols;
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (int64_t c = c0; c < c1; ++c) po[c] += static_cast<float>(acc[c - c0]);
    }
    return;
  }
  const Shape xstrides = x.strides();
  detail::for_each_row<2>(xs, {&xstrides, &ostrides}, 0, detail::num_rows(xs),
                          [&](int64_t, int64_t ox, int64_t oo) {
                            const int64_t len = detail::row_length(xs);
                            const int64_t so = xs.empty() ? 0 : ostrides.back();
                            for (int64_t i = 0; i < len; ++i) po[oo + i * so] += px[ox + i];
                          });
}

}  // namespace braid::ops::cpu
