// oneDNN matmul primitives for X W^T, created once per shape and cached for the process (the
// shape rule is compiled in every build so that tests can check it).
#include "ops/cpu/onednn_matmul.h"

namespace braid::ops::cpu {

bool matmul_primitive_suits(bool trans_a, bool trans_b, int64_t m, int64_t k, float alpha,
                            float beta) {
  return !trans_a && trans_b && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && m <= 512 &&
         k >= 512;
}

}  // namespace braid::ops::cpu

#if BRAID_CPU_GEMM_ONEDNN

#include <omp.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "braid/core/error.h"

namespace braid::ops::cpu {
namespace {

// Everything a primitive is specialised for; the thread count too, since its work split is.
using MatmulKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, int>;

struct CachedMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, bias, c, scratchpad;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

CachedMatmul make_matmul(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                         bool accumulate, bool with_bias) {
  using dnnl::memory;
  // op(B) = W^T is k x n; W is row-major n x k with leading dimension ldb.
  const memory::desc a({m, k}, memory::data_type::f32, memory::dims{lda, 1});
  const memory::desc b({k, n}, memory::data_type::f32, memory::dims{1, ldb});
  const memory::desc c({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  const memory::desc bias =
      with_bias ? memory::desc({1, n}, memory::data_type::f32, memory::dims{n, 1}) : memory::desc();
  dnnl::primitive_attr attr;
  // A scratchpad per call (not the library's shared one), so concurrent callers are safe.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc =
      with_bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  return {dnnl::matmul(pd), a, b, bias, c, pd.scratchpad_desc()};
}

const CachedMatmul& cached_matmul(const MatmulKey& key) {
  static std::mutex mutex;
  // A training run meets a few dozen shapes; generation adds one per context length (rows are
  // at most 512 here, so the cache stays bounded), and creating one costs far more than a call.
  static std::map<MatmulKey, CachedMatmul> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const auto [m, n, k, lda, ldb, ldc, accumulate, with_bias, threads] = key;
    it = cache.emplace(key, make_matmul(m, n, k, lda, ldb, ldc, accumulate, with_bias)).first;
  }
  return it->second;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

void onednn_matmul(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  BRAID_CHECK(bias == nullptr || beta == 0.0f, "onednn_matmul adds a bias only with beta = 0");
  try {
    const CachedMatmul& mm = cached_matmul(
        {m, n, k, lda, ldb, ldc, beta != 0.0f, bias != nullptr, omp_get_max_threads()});
    thread_local dnnl::stream stream(cpu_engine());
    thread_local std::unique_ptr<void, FreeDeleter> scratch;
    thread_local size_t scratch_bytes = 0;
    const size_t need = mm.scratchpad.get_size();
    if (need > scratch_bytes) {
      const size_t rounded = (need + 4095) / 4096 * 4096;
      scratch.reset(std::aligned_alloc(4096, rounded));
      BRAID_CHECK(scratch != nullptr, "out of memory for a {} byte oneDNN scratchpad", rounded);
      scratch_bytes = rounded;
    }
    const dnnl::engine& engine = cpu_engine();
    dnnl::memory am(mm.a, engine, const_cast<float*>(a));
    dnnl::memory bm(mm.b, engine, const_cast<float*>(b));
    dnnl::memory cm(mm.c, engine, c);
    dnnl::memory sm(mm.scratchpad, engine, scratch.get());
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(mm.bias, engine, const_cast<float*>(bias)));
    mm.primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    BRAID_FAIL("oneDNN matmul failed ({}) for A {}x{} (lda {}) times B^T {}x{} (ldb {}), C ldc {}",
               e.what(), m, k, lda, k, n, ldb, ldc);
  }
}

}  // namespace braid::ops::cpu

#endif  // BRAID_CPU_GEMM_ONEDNN
