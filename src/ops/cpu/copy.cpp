// CPU copy kernel: dense bytes over the threads, strided rows, and dtype conversion.
#include <omp.h>

#include <array>
#include <cstring>

#include "core/strided.h"
#include "ops/cpu/cpu_kernels.h"

namespace braid::ops::cpu {
namespace {

// Dense bytes from src to dst. A large copy is split over the OpenMP threads: one thread's
// memcpy reaches only a fraction of the memory bandwidth that several together do, and the
// large dense copies (checkpoint snapshots, an overlapped window's gradients) happen while the
// training threads wait for them. Overlapping ranges keep memmove's single pass.
void copy_bytes(void* dst, const void* src, size_t n) {
  constexpr size_t kParallelBytes = size_t{1} << 20;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const bool overlap = d < s + n && s < d + n;
  if (n < kParallelBytes || overlap || omp_in_parallel() || omp_get_max_threads() == 1) {
    std::memmove(dst, src, n);
    return;
  }
#pragma omp parallel
  {
    const size_t nt = static_cast<size_t>(omp_get_num_threads());
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    // Cache-line boundaries, so no two threads write one line.
    const size_t begin = n * t / nt / 64 * 64, end = t + 1 == nt ? n : n * (t + 1) / nt / 64 * 64;
    std::memcpy(d + begin, s + begin, end - begin);
  }
}

}  // namespace

void copy(const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const DType dt = dst.dtype(), st = src.dtype();
  const size_t es = dtype_size(dt);
  if (dt == st && dst.is_contiguous() && src.is_contiguous()) {
    copy_bytes(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  // Integer-to-integer copies must not round through float (i64 ids above 2^24).
  const bool exact_ints =
      (dt == DType::i32 || dt == DType::i64) && (st == DType::i32 || st == DType::i64);
  const Shape& sh = dst.shape();
  const int64_t rows = detail::num_rows(sh), len = detail::row_length(sh);
  const int64_t dst_inner = sh.empty() ? 1 : dst.strides().back();
  const int64_t src_inner = sh.empty() ? 1 : src.strides().back();
  char* dst_base = static_cast<char*>(dst.storage()->data());
  const char* src_base = static_cast<const char*>(src.storage()->data());
  const size_t ss = dtype_size(st);
  const Shape& ds = dst.strides();
  const Shape& sst = src.strides();
  const int64_t doff0 = dst.offset(), soff0 = src.offset();
#pragma omp parallel if (n > (1 << 16))
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    detail::for_each_row<2>(sh, {&ds, &sst}, r0, r1, [&](int64_t, int64_t doff, int64_t soff) {
      char* d = dst_base + (doff0 + doff) * es;
      const char* s = src_base + (soff0 + soff) * ss;
      if (dt == st && dst_inner == 1 && src_inner == 1) {
        std::memcpy(d, s, len * es);
      } else if (dt == st) {
        for (int64_t i = 0; i < len; ++i)
          std::memcpy(d + i * dst_inner * es, s + i * src_inner * ss, es);
      } else if (exact_ints) {
        for (int64_t i = 0; i < len; ++i) {
          const int64_t v = st == DType::i32 ? reinterpret_cast<const int32_t*>(s)[i * src_inner]
                                             : reinterpret_cast<const int64_t*>(s)[i * src_inner];
          if (dt == DType::i32)
            reinterpret_cast<int32_t*>(d)[i * dst_inner] = static_cast<int32_t>(v);
          else
            reinterpret_cast<int64_t*>(d)[i * dst_inner] = v;
        }
      } else {
        for (int64_t i = 0; i < len; ++i)
          store_from_float(d, i * dst_inner, dt, load_as_float(s, i * src_inner, st));
      }
    });
  }
}

}  // namespace braid::ops::cpu
