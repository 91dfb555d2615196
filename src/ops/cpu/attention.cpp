// CPU attention: tiled online-softmax forward and a backward that recomputes probabilities.
//
// The same algorithm as FlashAttention-2 (and braid's CUDA kernel): per (batch, head) the
// queries are processed in tiles against key tiles, keeping a running max and sum so the
// T x T matrix never exists; the forward stores each row's log-sum-exp, from which the
// backward rebuilds the probabilities tile by tile.
//
// Every product of two tiles (Q K^T, P V, dO V^T, P^T dO, dS^T Q, dS K) goes through one
// register-blocked micro-kernel, C (+)= A B with 4 rows x 2 vectors of accumulators (16
// columns, or 32 where the CPU has AVX-512), so each operand loaded from L1 feeds several
// FMAs. The operands are first packed into per-thread buffers (keys transposed where they are
// the B side of Q K^T, head dim padded to a multiple of 8 with zeros) so the kernel never
// needs a column tail. The backward sweeps key tiles in the outer loop and keeps dK and dV of
// the tile in local accumulators, and dQ of the whole head in a local buffer, writing each
// result once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/avx512_dispatch.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/fast_math.h"

namespace braid::ops::cpu {
namespace {

constexpr int64_t kQueryTile = 32;
constexpr int64_t kKeyTile = 64;

// Row pointer into a [B, H, T, D] view with unit stride in D.
struct HeadView {
  float* base;
  int64_t sb, sh, st;
  float* row(int64_t b, int64_t h, int64_t t) const { return base + b * sb + h * sh + t * st; }
};

HeadView view_of(const Tensor& t) {
  return {static_cast<float*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

int64_t round8(int64_t n) {
  return (n + 7) & ~int64_t{7};
}

// An inlined copy: std::copy_n of a runtime length goes through a memmove call, which costs
// more than the copy for rows of 64 floats.
inline void copy_row(const float* src, int64_t n, float* dst) {
  for (int64_t d = 0; d < n; ++d) dst[d] = src[d];
}

// Copies rows [t0, t0 + count) of one head into tile[c * ld + d] (row-major, d < D only).
void pack_rows(const HeadView& src, int64_t b, int64_t h, int64_t t0, int64_t count, int64_t D,
               int64_t ld, float* tile) {
  for (int64_t c = 0; c < count; ++c) copy_row(src.row(b, h, t0 + c), D, tile + c * ld);
}

// Copies keys [j0, j0 + count) of one head into tile[d * kKeyTile + c] (D-major).
void transpose_tile(const HeadView& src, int64_t b, int64_t h, int64_t j0, int64_t count, int64_t D,
                    float* tile) {
  for (int64_t c = 0; c < count; ++c) {
    const float* row = src.row(b, h, j0 + c);
    for (int64_t d = 0; d < D; ++d) tile[d * kKeyTile + c] = row[d];
  }
}

// C[R x L*NV] (+)= A[R x K] B[K x L*NV] with L = V's lanes, A's element (r, k) at
// A[r * ar + k * ak] so a transposed A costs nothing (its elements are broadcast one at a time
// anyway). The accumulators stay in registers for the whole K loop (R * NV <= 8 of the 16 ymm
// or 32 zmm registers, leaving room for the B row and a broadcast).
template <class V, int R, int NV>
[[gnu::always_inline]] inline void micro_kernel(float* C, int64_t ldc, const float* A, int64_t ar,
                                                int64_t ak, const float* B, int64_t ldb, int64_t K,
                                                bool accumulate) {
  constexpr int L = sizeof(V) / sizeof(float);
  V c[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? load_lanes<V>(C + r * ldc + L * v) : V{};
  for (int64_t k = 0; k < K; ++k) {
    V bk[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bk[v] = load_lanes<V>(B + k * ldb + L * v);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // x - 0 is x for every x (x + 0 is not for x = -0), so this folds to a bare broadcast.
      const V a = A[r * ar + k * ak] - V{};
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[r][v] += a * bk[v];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) store_lanes(C + r * ldc + L * v, c[r][v]);
}

// C[rows M, columns n0 .. n0 + L*NV) through micro_kernel, four rows at a time.
template <class V, int NV>
[[gnu::always_inline]] inline void column_block(float* C, int64_t ldc, const float* A, int64_t ar,
                                                int64_t ak, const float* B, int64_t ldb, int64_t M,
                                                int64_t n0, int64_t K, bool accumulate) {
  int64_t r = 0;
  for (; r + 4 <= M; r += 4)
    micro_kernel<V, 4, NV>(C + r * ldc + n0, ldc, A + r * ar, ar, ak, B + n0, ldb, K, accumulate);
  for (; r < M; ++r)
    micro_kernel<V, 1, NV>(C + r * ldc + n0, ldc, A + r * ar, ar, ak, B + n0, ldb, K, accumulate);
}

// C[M x N] (+)= A[M x K] B[K x N], row-major C and B, A strided as in micro_kernel; N must
// be a multiple of 8 (callers pad), M and K are arbitrary. Each element sums over K in order
// with the same fused multiply-adds whatever the lane width, so the result depends neither on
// the blocking nor on which of the two versions below runs.
template <class V>
[[gnu::always_inline]] inline void tile_gemm(float* C, int64_t ldc, const float* A, int64_t ar,
                                             int64_t ak, const float* B, int64_t ldb, int64_t M,
                                             int64_t N, int64_t K, bool accumulate) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  int64_t n = 0;
  for (; n + 2 * L <= N; n += 2 * L)
    column_block<V, 2>(C, ldc, A, ar, ak, B, ldb, M, n, K, accumulate);
  if (n + L <= N) {
    column_block<V, 1>(C, ldc, A, ar, ak, B, ldb, M, n, K, accumulate);
    n += L;
  }
  if (n < N) column_block<Vec8, 1>(C, ldc, A, ar, ak, B, ldb, M, n, K, accumulate);
}

using TileGemm = void (*)(float*, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                          int64_t, int64_t, int64_t, bool);
void tile_gemm_v8(float* C, int64_t ldc, const float* A, int64_t ar, int64_t ak, const float* B,
                  int64_t ldb, int64_t M, int64_t N, int64_t K, bool accumulate) {
  tile_gemm<Vec8>(C, ldc, A, ar, ak, B, ldb, M, N, K, accumulate);
}
#if BRAID_HAVE_AVX512_TARGET
BRAID_TARGET_AVX512 void tile_gemm_v16(float* C, int64_t ldc, const float* A, int64_t ar,
                                       int64_t ak, const float* B, int64_t ldb, int64_t M,
                                       int64_t N, int64_t K, bool accumulate) {
  tile_gemm<Vec16>(C, ldc, A, ar, ak, B, ldb, M, N, K, accumulate);
}
#else
constexpr TileGemm tile_gemm_v16 = tile_gemm_v8;
#endif

// The tile product this CPU runs fastest.
TileGemm pick_tile_gemm() {
  return use_avx512() ? tile_gemm_v16 : tile_gemm_v8;
}

// Number of keys of the tile starting at j0 (holding `count` keys) that query i may see.
int64_t visible_keys(bool causal, int64_t i, int64_t j0, int64_t count) {
  if (!causal) return count;
  return std::clamp<int64_t>(i - j0 + 1, 0, count);
}

// All-ones in the lanes c0 + lane < limit: masks the causal and ragged-tile columns.
inline Vec8i lanes_below(int64_t c0, int64_t limit) {
  const Vec8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
  return lane < static_cast<int32_t>(limit - c0);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale,
                       Tensor& out, Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Dp = round8(D);
  const HeadView Q = view_of(q), K = view_of(k), V = view_of(v), O = view_of(out);
  float* L = lse.data<float>();
  const TileGemm gemm = pick_tile_gemm();
#pragma omp parallel
  {
    // Zero-initialised once: only d < D is ever packed, so the padding columns stay zero.
    std::vector<float> qp(kQueryTile * Dp), kt(D * kKeyTile), vp(kKeyTile * Dp);
    std::vector<float> s(kQueryTile * kKeyTile), acc(kQueryTile * Dp);
    std::vector<float> m(kQueryTile), l(kQueryTile);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i0 = 0; i0 < T; i0 += kQueryTile) {
          const int64_t rq = std::min(kQueryTile, T - i0);
          std::fill(m.begin(), m.end(), -INFINITY);
          std::fill(l.begin(), l.end(), 0.0f);
          std::fill(acc.begin(), acc.end(), 0.0f);
          pack_rows(Q, b, h, i0, rq, D, Dp, qp.data());
          const int64_t key_end = causal ? i0 + rq : T;
          for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
            const int64_t ck = std::min(kKeyTile, key_end - j0);
            const int64_t ck8 = round8(ck);
            transpose_tile(K, b, h, j0, ck, D, kt.data());
            pack_rows(V, b, h, j0, ck, D, Dp, vp.data());
            gemm(s.data(), kKeyTile, qp.data(), Dp, 1, kt.data(), kKeyTile, rq, ck8, D, false);
            for (int64_t r = 0; r < rq; ++r) {
              const int64_t limit = visible_keys(causal, i0 + r, j0, ck);
              float* srow = s.data() + r * kKeyTile;
              if (limit <= 0) {  // nothing visible: contribute zeros, keep m and l
                std::fill_n(srow, ck8, 0.0f);
                continue;
              }
              Vec8 vmax = Vec8{} - INFINITY;
              for (int64_t c = 0; c < ck8; c += 8) {
                Vec8 x = load8(srow + c) * scale;
                x = lanes_below(c, limit) ? x : Vec8{} - INFINITY;
                store8(srow + c, x);
                vmax = x > vmax ? x : vmax;
              }
              float mx = m[r];
              for (int ln = 0; ln < 8; ++ln) mx = std::max(mx, vmax[ln]);
              const float correction = std::exp(m[r] - mx);  // 0 on the first tile (m = -inf)
              Vec8 sum{};
              for (int64_t c = 0; c < ck8; c += 8) {
                // fast_exp clamps -inf to a tiny positive value, so masked lanes are zeroed.
                Vec8 e = fast_exp(load8(srow + c) - mx);
                e = lanes_below(c, limit) ? e : Vec8{};
                store8(srow + c, e);
                sum += e;
              }
              l[r] = l[r] * correction + lane_sum(sum);
              m[r] = mx;
              float* a = acc.data() + r * Dp;
              for (int64_t d = 0; d < Dp; d += 8) store8(a + d, load8(a + d) * correction);
            }
            gemm(acc.data(), Dp, s.data(), kKeyTile, 1, vp.data(), Dp, rq, Dp, ck, true);
          }
          for (int64_t r = 0; r < rq; ++r) {
            const float inv = 1.0f / l[r];
            float* orow = O.row(b, h, i0 + r);
            const float* a = acc.data() + r * Dp;
            for (int64_t d = 0; d < D; ++d) orow[d] = a[d] * inv;
            L[(b * H + h) * T + i0 + r] = m[r] + std::log(l[r]);
          }
        }
      }
    }
  }
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Dp = round8(D);
  const HeadView Q = view_of(q), K = view_of(k), V = view_of(v), O = view_of(out);
  const HeadView dO = view_of(dout), dQ = view_of(dq), dK = view_of(dk), dV = view_of(dv);
  const float* L = lse.data<float>();
  const TileGemm gemm = pick_tile_gemm();
#pragma omp parallel
  {
    // Zero-initialised once: only d < D is ever packed, so the padding columns stay zero.
    std::vector<float> kt(D * kKeyTile), vt(D * kKeyTile), kp(kKeyTile * Dp);
    std::vector<float> qp(kQueryTile * Dp), gp(kQueryTile * Dp);
    std::vector<float> s(kQueryTile * kKeyTile), dp(kQueryTile * kKeyTile);
    std::vector<float> probs(kQueryTile * kKeyTile);
    std::vector<float> dk_acc(kKeyTile * Dp), dv_acc(kKeyTile * Dp), dq_acc(T * Dp);
    std::vector<float> delta(T);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        const float* lse_row = L + (b * H + h) * T;
        for (int64_t i = 0; i < T; ++i) {
          // delta_i = dO_i . O_i: the softmax-backward term shared by every key of row i.
          const float* g = dO.row(b, h, i);
          const float* o = O.row(b, h, i);
          float acc = 0.0f;
          for (int64_t d = 0; d < D; ++d) acc += g[d] * o[d];
          delta[i] = acc;
        }
        std::fill(dq_acc.begin(), dq_acc.end(), 0.0f);
        for (int64_t j0 = 0; j0 < T; j0 += kKeyTile) {
          const int64_t ck = std::min(kKeyTile, T - j0);
          transpose_tile(K, b, h, j0, ck, D, kt.data());
          transpose_tile(V, b, h, j0, ck, D, vt.data());
          pack_rows(K, b, h, j0, ck, D, Dp, kp.data());
          std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
          std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
          // Causal: query tiles before j0 see none of these keys (j0 is a multiple of the
          // query tile).
          for (int64_t i0 = causal ? j0 : 0; i0 < T; i0 += kQueryTile) {
            const int64_t rq = std::min(kQueryTile, T - i0);
            // Keys of the tile that any row of this query tile may see.
            const int64_t cv = causal ? std::min(ck, i0 + rq - j0) : ck;
            const int64_t cv8 = round8(cv);
            pack_rows(Q, b, h, i0, rq, D, Dp, qp.data());
            pack_rows(dO, b, h, i0, rq, D, Dp, gp.data());
            gemm(s.data(), kKeyTile, qp.data(), Dp, 1, kt.data(), kKeyTile, rq, cv8, D, false);
            gemm(dp.data(), kKeyTile, gp.data(), Dp, 1, vt.data(), kKeyTile, rq, cv8, D,
                 false);  // dP = dO V^T
            for (int64_t r = 0; r < rq; ++r) {
              const int64_t i = i0 + r;
              const int64_t limit = visible_keys(causal, i, j0, cv);
              float* srow = s.data() + r * kKeyTile;  // S in, dS out
              float* prow = probs.data() + r * kKeyTile;
              const float* dprow = dp.data() + r * kKeyTile;
              for (int64_t c = 0; c < cv8; c += 8) {
                Vec8 p = fast_exp(load8(srow + c) * scale - lse_row[i]);
                p = lanes_below(c, limit) ? p : Vec8{};
                const Vec8 ds = p * (load8(dprow + c) - delta[i]) * scale;
                store8(prow + c, p);
                store8(srow + c, ds);
              }
            }
            // dV += P^T dO, dK += dS^T Q (both A operands read transposed), dQ += dS K.
            gemm(dv_acc.data(), Dp, probs.data(), 1, kKeyTile, gp.data(), Dp, cv, Dp, rq, true);
            gemm(dk_acc.data(), Dp, s.data(), 1, kKeyTile, qp.data(), Dp, cv, Dp, rq, true);
            gemm(dq_acc.data() + i0 * Dp, Dp, s.data(), kKeyTile, 1, kp.data(), Dp, rq, Dp, cv,
                 true);
          }
          for (int64_t c = 0; c < ck; ++c) {
            copy_row(dk_acc.data() + c * Dp, D, dK.row(b, h, j0 + c));
            copy_row(dv_acc.data() + c * Dp, D, dV.row(b, h, j0 + c));
          }
        }
        for (int64_t i = 0; i < T; ++i) copy_row(dq_acc.data() + i * Dp, D, dQ.row(b, h, i));
      }
    }
  }
}

}  // namespace braid::ops::cpu
