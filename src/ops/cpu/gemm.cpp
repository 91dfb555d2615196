// CPU GEMM, a linear layer's forward product and its pair of gradient products through the
// configured sgemm library; strided (transposed) views go in without copies.
#include <omp.h>

#include "braid/ops/gemm_layout.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/sgemm_backend.h"
#include "ops/cpu/split_gemm.h"

namespace braid::ops::cpu {
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha, float beta,
          Tensor& c) {
  const int64_t m = c.size(-2), n = c.size(-1);
  const int64_t k = trans_a ? a.size(-2) : a.size(-1);
  BRAID_CHECK((trans_a ? a.size(-1) : a.size(-2)) == m &&
                  (trans_b ? b.size(-1) : b.size(-2)) == k &&
                  (trans_b ? b.size(-2) : b.size(-1)) == n,
              "gemm shapes do not chain: {}{} @ {}{} -> {}", a.str(), trans_a ? "^T" : "", b.str(),
              trans_b ? "^T" : "", c.str());
  BRAID_CHECK(c.stride(-1) == 1 || n == 1, "gemm output {} needs unit stride in its last dim",
              c.str());
  const RowMajorOperand ma =
      as_row_major(a.size(-2), a.size(-1), a.stride(-2), a.stride(-1), trans_a, "a");
  const RowMajorOperand mb =
      as_row_major(b.size(-2), b.size(-1), b.stride(-2), b.stride(-1), trans_b, "b");
  const int64_t ldc = m > 1 ? c.stride(-2) : std::max<int64_t>(n, 1);

  // Batch dims: c's leading dims; a and b either share them or are plain matrices.
  const int batch_dims = c.dim() - 2;
  int64_t batches = 1;
  for (int d = 0; d < batch_dims; ++d) batches *= c.shape()[d];
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  for (int64_t i = 0; i < batches; ++i) {
    int64_t oa = 0, ob = 0, oc = 0, rem = i;
    for (int d = batch_dims - 1; d >= 0; --d) {
      const int64_t idx = rem % c.shape()[d];
      rem /= c.shape()[d];
      oc += idx * c.strides()[d];
      if (a.dim() > 2) oa += idx * a.strides()[d];
      if (b.dim() > 2) ob += idx * b.strides()[d];
    }
    row_major_sgemm(ma.transposed, mb.transposed, m, n, k, alpha, pa + oa, ma.ld, pb + ob, mb.ld,
                    beta, pc + oc, ldc);
  }
}

void linear_bias(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& out) {
  const int64_t m = out.size(0), n = out.size(1), k = x.size(1);
  BRAID_CHECK(x.dim() == 2 && weight.dim() == 2 && out.dim() == 2 && x.size(0) == m &&
                  weight.size(0) == n && weight.size(1) == k && bias.numel() == n &&
                  bias.is_contiguous() && out.stride(1) == 1,
              "linear_bias shapes do not chain: x {} weight {} bias {} -> out {} (bias dense, out "
              "with unit stride in its last dim)",
              x.str(), weight.str(), bias.str(), out.str());
  const RowMajorOperand mx = as_row_major(m, k, x.stride(0), x.stride(1), false, "x");
  const RowMajorOperand mw = as_row_major(n, k, weight.stride(0), weight.stride(1), true, "weight");
  row_major_sgemm_bias(mx.transposed, mw.transposed, m, n, k, x.data<float>(), mx.ld,
                       weight.data<float>(), mw.ld, bias.data<float>(), out.data<float>(),
                       m > 1 ? out.stride(0) : std::max<int64_t>(n, 1));
}

// Whether split_gemm.h cuts the product, balancing its chunks over all threads itself.
bool cut_into_chunks(const GemmProduct& p) {
  const int64_t k = p.trans_a ? p.a->size(-2) : p.a->size(-1);
  return plan_gemm_split(p.c->size(-2), p.c->size(-1), k).axis != GemmSplit::Axis::none;
}

// On two threads the products run at once, each whole on one thread. A single-threaded GEMM
// packs its operands once and ends without waiting for a partner: on GPT-2 124M's and on a
// 256-wide model's block shapes a linear layer's two gradient products took about the time of
// the two 2-thread GEMMs in sequence, sometimes less (cold-cache probes). One
// thread runs them in turn, with the same results. With more threads (not measured), or a product
// that split_gemm.h cuts, each product gets all the threads in turn.
void gemm_pair(const GemmProduct& first, const GemmProduct& second) {
  auto run = [](const GemmProduct& p) {
    gemm(*p.a, p.trans_a, *p.b, p.trans_b, p.alpha, p.beta, *p.c);
  };
  if (omp_get_max_threads() > 2 || omp_in_parallel() || cut_into_chunks(first) ||
      cut_into_chunks(second)) {
    run(first);
    run(second);
    return;
  }
  for_each_chunk_as_threads_free_up(2, [&](int64_t i) { run(i == 0 ? first : second); });
}

}  // namespace braid::ops::cpu
