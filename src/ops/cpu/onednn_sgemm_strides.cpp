// The no-copy stride rule for oneDNN's sgemm and the padded operand copy (onednn_sgemm_strides.h).
#include "ops/cpu/onednn_sgemm_strides.h"

#include <omp.h>

#include <cstring>

#if BRAID_CPU_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace braid::ops::cpu {
namespace {

// oneDNN's threshold on 1/m + 1/n for forcing its no-copy kernels on AVX2 (gemm_driver.cpp).
constexpr double kNoCopyThreshold = 0.0038;
constexpr int64_t kLineFloats = 16;          // a 64-byte cache line
constexpr int64_t kMinCopiedFloats = 16384;  // 64 KB

}  // namespace

bool onednn_sgemm_reads_in_place(int64_t m, int64_t n, bool avx512) {
  if (avx512 || m <= 0 || n <= 0) return false;
  return 1.0 / static_cast<double>(m) + 1.0 / static_cast<double>(n) >= kNoCopyThreshold;
}

bool stride_spreads_cache_sets(int64_t ld) {
  return ld > 0 && ld % kLineFloats == 0 && (ld / kLineFloats) % 2 == 1;
}

int64_t set_spreading_stride(int64_t cols) {
  int64_t lines = (cols + kLineFloats - 1) / kLineFloats;
  if (lines % 2 == 0) ++lines;
  return lines * kLineFloats;
}

bool onednn_reads_better_from_copy(int64_t m, int64_t n, int64_t k, int64_t cols, int64_t ld,
                                   bool avx512) {
  // A stride below the width is the caller's error, left for oneDNN to report, not to be copied.
  return onednn_sgemm_reads_in_place(m, n, avx512) && ld >= cols &&
         !stride_spreads_cache_sets(ld) && k * cols >= kMinCopiedFloats;
}

bool onednn_has_avx512() {
#if BRAID_CPU_GEMM_ONEDNN
  static const bool avx512 = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const unsigned core = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    return (isa & core) == core;
  }();
  return avx512;
#else
  return false;
#endif
}

SgemmOperand::SgemmOperand(const float* data, int64_t rows, int64_t cols, int64_t ld, bool restride)
    : data_(data), ld_(ld) {
  if (!restride) return;
  ld_ = set_spreading_stride(cols);
  copy_.emplace(static_cast<size_t>(rows * ld_));
  float* out = copy_->data;
  const int64_t out_ld = ld_;
  // Inside a gradient pair or a chunk the caller's thread copies alone, as it multiplies alone.
#pragma omp parallel for if (!omp_in_parallel() && rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * out_ld, data + r * ld, static_cast<size_t>(cols) * sizeof(float));
}

}  // namespace braid::ops::cpu
