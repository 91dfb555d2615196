// The strides at which oneDNN's AVX2 sgemm reads operands slowly, and the padded copy it reads
// instead.
//
// oneDNN 2.x sends every sgemm with a short side (1/m + 1/n >= 0.0038, so m or n up to ~263) to
// its "no-copy" kernels, which read A and B in place instead of packing them. An operand whose
// rows run along the reduction (B untransposed, A transposed) is then read many rows at a time,
// and unless its rows start an odd number of cache lines apart they share a subset of the L1 sets
// and evict each other. On AVX2 (Zen 3), copying such an operand to an odd-line stride first makes
// these products faster, the copy included, most of all at multiples of 1024 floats (measured
// with braid_micro_bench; the analysis is in git's history of docs/performance.md). On AVX-512
// oneDNN's own selection keeps no-copy kernels off the worst strides, and nothing is copied there.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/cpu/host_scratch.h"

namespace braid::ops::cpu {

// Whether oneDNN's sgemm reads the operands of an m x n product in place: a short side, on a CPU
// without AVX-512 (`avx512` says which the running CPU is; see onednn_has_avx512).
bool onednn_sgemm_reads_in_place(int64_t m, int64_t n, bool avx512);

// Whether rows this many floats apart start an odd number of 64-byte cache lines apart, so that
// consecutive rows cycle through all of the L1 sets.
bool stride_spreads_cache_sets(int64_t ld);

// The smallest stride of at least `cols` floats that spreads rows over the sets.
int64_t set_spreading_stride(int64_t cols);

// Whether oneDNN's sgemm for an m x n x k product should read an operand whose rows run along the
// reduction (k rows of `cols` floats, `ld` apart) from a set-spreading copy: oneDNN reads it in
// place, its stride does not spread the rows already, and the block is larger than twice a 32 KB
// L1 cache (a smaller one stays cached however its rows fall, and is not worth a copy).
bool onednn_reads_better_from_copy(int64_t m, int64_t n, int64_t k, int64_t cols, int64_t ld,
                                   bool avx512);

// Whether the oneDNN library braid runs on uses AVX-512 (its effective ISA); false in a build
// without oneDNN.
bool onednn_has_avx512();

// An operand as the sgemm will read it: the caller's matrix, or, when `restride` is set, a copy
// of its rows x cols block at set_spreading_stride(cols).
class SgemmOperand {
 public:
  SgemmOperand(const float* data, int64_t rows, int64_t cols, int64_t ld, bool restride);

  const float* data() const { return copy_ ? copy_->data : data_; }
  int64_t ld() const { return ld_; }
  bool copied() const { return copy_.has_value(); }

 private:
  const float* data_;
  int64_t ld_;
  std::optional<HostScratch> copy_;
};

}  // namespace braid::ops::cpu
