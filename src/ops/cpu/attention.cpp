// CPU attention: tiled online-softmax forward and a backward that recomputes probabilities.
//
// The same algorithm as FlashAttention-2 (and braid's CUDA kernel): per (batch, head) the
// queries are processed in tiles against key tiles, keeping a running max and sum so the
// T x T matrix never exists; the forward stores each row's log-sum-exp, from which the
// backward rebuilds the probabilities tile by tile. Inner loops run over a contiguous
// dimension (D, or a transposed key tile) so the compiler vectorises them.
#include <cmath>
#include <vector>

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

// Copies keys [j0, j0 + count) of one head into tile[d * kKeyTile + c] (D-major).
void transpose_tile(const HeadView& src, int64_t b, int64_t h, int64_t j0, int64_t count,
                    int64_t D, float* tile) {
  for (int64_t c = 0; c < count; ++c) {
    const float* row = src.row(b, h, j0 + c);
    for (int64_t d = 0; d < D; ++d) tile[d * kKeyTile + c] = row[d];
  }
}

// scores[c] = sum_d q_scaled[d] * tile[d][c] for c < count.
void row_scores(const float* q_scaled, const float* tile, int64_t count, int64_t D,
                float* scores) {
  for (int64_t c = 0; c < count; ++c) scores[c] = 0.0f;
  for (int64_t d = 0; d < D; ++d) {
    const float qd = q_scaled[d];
    const float* t = tile + d * kKeyTile;
    for (int64_t c = 0; c < count; ++c) scores[c] += qd * t[c];
  }
}

// Number of keys of the tile starting at j0 (holding `count` keys) that query i may see.
int64_t visible_keys(bool causal, int64_t i, int64_t j0, int64_t count) {
  if (!causal) return count;
  return std::min(count, i - j0 + 1);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                       float scale, Tensor& out, Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const HeadView Q = view_of(q), K = view_of(k), V = view_of(v), O = view_of(out);
  float* L = lse.data<float>();
#pragma omp parallel
  {
    std::vector<float> kt(D * kKeyTile), s(kQueryTile * kKeyTile), acc(kQueryTile * D), qs(D);
    std::vector<float> m(kQueryTile), l(kQueryTile);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i0 = 0; i0 < T; i0 += kQueryTile) {
          const int64_t rq = std::min(kQueryTile, T - i0);
          std::fill(m.begin(), m.end(), -INFINITY);
          std::fill(l.begin(), l.end(), 0.0f);
          std::fill(acc.begin(), acc.end(), 0.0f);
          const int64_t key_end = causal ? i0 + rq : T;
          for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
            const int64_t ck = std::min(kKeyTile, key_end - j0);
            transpose_tile(K, b, h, j0, ck, D, kt.data());
            for (int64_t r = 0; r < rq; ++r) {
              const int64_t i = i0 + r;
              const int64_t limit = visible_keys(causal, i, j0, ck);
              if (limit <= 0) continue;
              const float* qrow = Q.row(b, h, i);
              for (int64_t d = 0; d < D; ++d) qs[d] = qrow[d] * scale;
              float* srow = s.data() + r * kKeyTile;
              row_scores(qs.data(), kt.data(), limit, D, srow);
              const float mx = std::max(m[r], row_max(srow, limit));
              const float correction = std::exp(m[r] - mx);  // 0 on the first tile (m = -inf)
              const float total = row_exp(srow, limit, mx, 1.0f, srow);
              l[r] = l[r] * correction + total;
              m[r] = mx;
              float* a = acc.data() + r * D;
              for (int64_t d = 0; d < D; ++d) a[d] *= correction;
              for (int64_t c = 0; c < limit; ++c) {
                const float p = srow[c];
                const float* vrow = V.row(b, h, j0 + c);
                for (int64_t d = 0; d < D; ++d) a[d] += p * vrow[d];
              }
            }
          }
          for (int64_t r = 0; r < rq; ++r) {
            const float inv = 1.0f / l[r];
            float* orow = O.row(b, h, i0 + r);
            const float* a = acc.data() + r * D;
            for (int64_t d = 0; d < D; ++d) orow[d] = a[d] * inv;
            L[(b * H + h) * T + i0 + r] = m[r] + std::log(l[r]);
          }
        }
      }
    }
  }
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, bool causal, float scale,
                        Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const HeadView Q = view_of(q), K = view_of(k), V = view_of(v), O = view_of(out);
  const HeadView dO = view_of(dout), dQ = view_of(dq), dK = view_of(dk), dV = view_of(dv);
  const float* L = lse.data<float>();
#pragma omp parallel
  {
    std::vector<float> kt(D * kKeyTile), vt(D * kKeyTile), p(kKeyTile), dp(kKeyTile), qs(D);
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
          for (float* row : {dQ.row(b, h, i), dK.row(b, h, i), dV.row(b, h, i)})
            for (int64_t d = 0; d < D; ++d) row[d] = 0.0f;
        }
        for (int64_t j0 = 0; j0 < T; j0 += kKeyTile) {
          const int64_t ck = std::min(kKeyTile, T - j0);
          transpose_tile(K, b, h, j0, ck, D, kt.data());
          transpose_tile(V, b, h, j0, ck, D, vt.data());
          for (int64_t i = causal ? j0 : 0; i < T; ++i) {
            const int64_t limit = visible_keys(causal, i, j0, ck);
            if (limit <= 0) continue;
            const float* qrow = Q.row(b, h, i);
            const float* grow = dO.row(b, h, i);
            for (int64_t d = 0; d < D; ++d) qs[d] = qrow[d] * scale;
            row_scores(qs.data(), kt.data(), limit, D, p.data());
            row_exp(p.data(), limit, lse_row[i], 1.0f, p.data());
            row_scores(grow, vt.data(), limit, D, dp.data());  // dP = dO_i . V_c
            float* dqrow = dQ.row(b, h, i);
            for (int64_t c = 0; c < limit; ++c) {
              const float ds = p[c] * (dp[c] - delta[i]) * scale;
              float* dvrow = dV.row(b, h, j0 + c);
              float* dkrow = dK.row(b, h, j0 + c);
              const float* krow = K.row(b, h, j0 + c);
              const float pc = p[c];
              for (int64_t d = 0; d < D; ++d) {
                dvrow[d] += pc * grow[d];
                dkrow[d] += ds * qrow[d];
                dqrow[d] += ds * krow[d];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace braid::ops::cpu
