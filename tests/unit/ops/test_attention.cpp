// attention and causal_self_attention against full softmax(QK^T * scale + mask) V in float64,
// across several query/key tiles with a ragged last tile, strided q/k/v views, and errors.
#include <cmath>

#include "braid/ops/attention.h"
#include "braid/ops/views.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

struct Dims {
  int64_t B, H, T, D;
  int64_t idx(int64_t b, int64_t h, int64_t t, int64_t d) const {
    return ((b * H + h) * T + t) * D + d;
  }
};

// Probabilities P[b, h, i, j] = softmax_j(q_i . k_j * scale), masked to j <= i when causal.
std::vector<double> probabilities(const Dims& s, const std::vector<double>& q,
                                  const std::vector<double>& k, bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.D));
  std::vector<double> p(static_cast<size_t>(s.B * s.H * s.T * s.T), 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        double* row = p.data() + ((b * s.H + h) * s.T + i) * s.T;
        const int64_t visible = causal ? i + 1 : s.T;
        double mx = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < s.D; ++d) dot += q[s.idx(b, h, i, d)] * k[s.idx(b, h, j, d)];
          row[j] = dot * scale;
          mx = std::max(mx, row[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < visible; ++j) total += (row[j] = std::exp(row[j] - mx));
        for (int64_t j = 0; j < visible; ++j) row[j] /= total;
      }
  return p;
}

// out = P V, all [B, H, T, D] dense.
std::vector<double> attention_ref(const Dims& s, const std::vector<double>& q,
                                  const std::vector<double>& k, const std::vector<double>& v,
                                  bool causal) {
  const std::vector<double> p = probabilities(s, q, k, causal);
  std::vector<double> out(q.size(), 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.T; ++i)
        for (int64_t j = 0; j < s.T; ++j) {
          const double pij = p[((b * s.H + h) * s.T + i) * s.T + j];
          for (int64_t d = 0; d < s.D; ++d) out[s.idx(b, h, i, d)] += pij * v[s.idx(b, h, j, d)];
        }
  return out;
}

// The textbook gradients of out = softmax(S) V, S = scale Q K^T (dense matrices, no tiling):
// dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = scale dS K, dK = scale dS^T Q.
void attention_backward_ref(const Dims& s, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            const std::vector<double>& dout, bool causal, std::vector<double>& dq,
                            std::vector<double>& dk, std::vector<double>& dv) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.D));
  const std::vector<double> p = probabilities(s, q, k, causal);
  dq.assign(q.size(), 0.0);
  dk.assign(q.size(), 0.0);
  dv.assign(q.size(), 0.0);
  std::vector<double> dp(static_cast<size_t>(s.T));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        const double* prow = p.data() + ((b * s.H + h) * s.T + i) * s.T;
        double row_dot = 0;
        for (int64_t j = 0; j < s.T; ++j) {
          dp[j] = 0;
          for (int64_t d = 0; d < s.D; ++d) dp[j] += dout[s.idx(b, h, i, d)] * v[s.idx(b, h, j, d)];
          row_dot += dp[j] * prow[j];
        }
        for (int64_t j = 0; j < s.T; ++j) {
          const double ds = prow[j] * (dp[j] - row_dot);
          for (int64_t d = 0; d < s.D; ++d) {
            dv[s.idx(b, h, j, d)] += prow[j] * dout[s.idx(b, h, i, d)];
            dq[s.idx(b, h, i, d)] += scale * ds * k[s.idx(b, h, j, d)];
            dk[s.idx(b, h, j, d)] += scale * ds * q[s.idx(b, h, i, d)];
          }
        }
      }
}

// [B, T, H, D] dense values -> [B, H, T, D] dense values.
std::vector<double> bthd_to_bhtd(const Dims& s, const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t d = 0; d < s.D; ++d)
          out[s.idx(b, h, t, d)] = x[((b * s.T + t) * s.H + h) * s.D + d];
  return out;
}

// Forward tolerance: scores are length-D dot products and the output a convex combination of
// v rows, all O(1); the online softmax adds a few roundings per tile: ~1e-6, so 1e-5.
OpCase attention_case(std::string name, Dims s, bool causal, bool strided_views, uint64_t seed) {
  OpCase c;
  c.op = "attention";
  c.name = std::move(name);
  const Shape stored = strided_views ? Shape{s.B, s.T, s.H, s.D} : Shape{s.B, s.H, s.T, s.D};
  c.make_inputs = [stored, seed] {
    return std::vector<Tensor>{randn(stored, seed), randn(stored, seed + 1),
                               randn(stored, seed + 2)};
  };
  c.fn = [causal, strided_views](const std::vector<Tensor>& x) {
    if (!strided_views) return std::vector<Tensor>{attention(x[0], x[1], x[2], causal)};
    return std::vector<Tensor>{
        attention(transpose(x[0], 1, 2), transpose(x[1], 1, 2), transpose(x[2], 1, 2), causal)};
  };
  c.reference = [s, causal, strided_views](const std::vector<Tensor>& x) {
    auto values = [&](const Tensor& t) {
      return strided_views ? bthd_to_bhtd(s, to_double(t)) : to_double(t);
    };
    return std::vector<std::vector<double>>{
        attention_ref(s, values(x[0]), values(x[1]), values(x[2]), causal)};
  };
  return c;
}

// qkv [B, T, 3C] -> q, k, v as [B, H, T, D] dense values.
void split_qkv(const Dims& s, const std::vector<double>& qkv, std::vector<double>& q,
               std::vector<double>& k, std::vector<double>& v) {
  const int64_t C = s.H * s.D;
  q.resize(static_cast<size_t>(s.B * s.H * s.T * s.D));
  k.resize(q.size());
  v.resize(q.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t d = 0; d < s.D; ++d) {
          const int64_t base = (b * s.T + t) * 3 * C + h * s.D + d;
          q[s.idx(b, h, t, d)] = qkv[base];
          k[s.idx(b, h, t, d)] = qkv[base + C];
          v[s.idx(b, h, t, d)] = qkv[base + 2 * C];
        }
}

OpCase fused_case(std::string name, Dims s, uint64_t seed) {
  OpCase c;
  c.op = "causal_self_attention";
  c.name = std::move(name);
  const int64_t C = s.H * s.D;
  c.make_inputs = [s, C, seed] { return std::vector<Tensor>{randn({s.B, s.T, 3 * C}, seed)}; };
  c.fn = [s](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{causal_self_attention(x[0], s.H)};
  };
  c.reference = [s, C](const std::vector<Tensor>& x) {
    std::vector<double> q, k, v;
    split_qkv(s, to_double(x[0]), q, k, v);
    const std::vector<double> heads = attention_ref(s, q, k, v, true);
    std::vector<double> out(static_cast<size_t>(s.B * s.T * C));  // merge heads: [B, T, H*D]
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t d = 0; d < s.D; ++d)
            out[(b * s.T + t) * C + h * s.D + d] = heads[s.idx(b, h, t, d)];
    return std::vector<std::vector<double>>{out};
  };
  return c;
}

std::vector<OpCase> attention_cases() {
  std::vector<OpCase> cases;
  cases.push_back(attention_case("attention_causal_small", {2, 3, 5, 8}, true, false, 300));
  cases.push_back(attention_case("attention_full_small", {2, 3, 5, 8}, false, false, 303));
  cases.push_back(attention_case("attention_causal_strided_views", {2, 3, 6, 4}, true, true, 306));
  // T = 70: query tiles of 32, 32, 6 and key tiles of 64, 6; q/k/v are transposed views.
  OpCase tiles_causal =
      attention_case("attention_causal_T70_D8_views", {2, 3, 70, 8}, true, true, 309);
  OpCase tiles_full =
      attention_case("attention_full_T70_D16_views", {2, 3, 70, 16}, false, true, 312);
  tiles_causal.grad.max_elements = 96;
  tiles_full.grad.max_elements = 96;
  cases.push_back(tiles_causal);
  cases.push_back(tiles_full);
  cases.push_back(fused_case("causal_self_attention_small", {2, 3, 7, 4}, 320));
  OpCase fused_tiles = fused_case("causal_self_attention_T70", {2, 3, 70, 8}, 321);
  fused_tiles.grad.max_elements = 128;
  cases.push_back(fused_tiles);

  // The output consumed transposed in its last two dims: the incoming gradient has no unit
  // stride in D, so the backward must make it dense first.
  OpCase out_t = attention_case("attention_output_transposed", {2, 3, 6, 4}, true, false, 330);
  out_t.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{transpose(attention(x[0], x[1], x[2], true), 2, 3)};
  };
  out_t.reference = [ref = out_t.reference](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{permute_values(ref(x)[0], {2, 3, 6, 4}, {0, 1, 3, 2})};
  };
  cases.push_back(out_t);

  OpCase fused_t = fused_case("causal_self_attention_output_transposed", {2, 2, 5, 4}, 331);
  fused_t.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{transpose(causal_self_attention(x[0], 2), 1, 2)};
  };
  fused_t.reference = [ref = fused_t.reference](const std::vector<Tensor>& x) {
    return std::vector<std::vector<double>>{permute_values(ref(x)[0], {2, 5, 8}, {0, 2, 1})};
  };
  cases.push_back(fused_t);
  return cases;
}

const OpCaseRegistrar kRegister(attention_cases());

// Every element of every gradient, for sequence lengths around the tile edges, against the
// dense textbook backward. Tolerance: both sides are O(1) sums of T products; fp32 rounding of
// the recomputed probabilities and of the accumulations is ~1e-6 relative.
TEST(Attention, AllGradientsMatchDenseReferenceAcrossTiles) {
  for (bool causal : {true, false}) {
    for (int64_t T : {1, 31, 32, 33, 64, 65, 70}) {
      for (int64_t D : {8, 16}) {
        SCOPED_TRACE(::testing::Message() << "causal " << causal << " T " << T << " D " << D);
        const Dims s{2, 3, T, D};
        const uint64_t seed = 400 + T * 10 + D + (causal ? 1 : 0);
        // q, k, v as transposed views of [B, T, H, D] buffers.
        Tensor qs = randn({s.B, T, s.H, D}, seed), ks = randn({s.B, T, s.H, D}, seed + 1),
               vs = randn({s.B, T, s.H, D}, seed + 2);
        Tensor q = transpose(qs.set_requires_grad(true), 1, 2);
        Tensor k = transpose(ks.set_requires_grad(true), 1, 2);
        Tensor v = transpose(vs.set_requires_grad(true), 1, 2);
        if (T > 1) {
          EXPECT_FALSE(q.is_contiguous());
        }
        Tensor out = attention(q, k, v, causal);
        const std::vector<double> qv = bthd_to_bhtd(s, to_double(qs)),
                                  kv = bthd_to_bhtd(s, to_double(ks)),
                                  vv = bthd_to_bhtd(s, to_double(vs));
        expect_close(out, attention_ref(s, qv, kv, vv, causal), 1e-5, 1e-5);
        Tensor g = randn({s.B, s.H, T, D}, seed + 3);
        out.backward(g);
        std::vector<double> dq, dk, dv;
        attention_backward_ref(s, qv, kv, vv, to_double(g), causal, dq, dk, dv);
        expect_close(transpose(qs.grad(), 1, 2), dq, 1e-4, 1e-5);
        expect_close(transpose(ks.grad(), 1, 2), dk, 1e-4, 1e-5);
        expect_close(transpose(vs.grad(), 1, 2), dv, 1e-4, 1e-5);
      }
    }
  }
}

TEST(Attention, OutputIsAHeadsMergeFriendlyView) {
  // The result is a [B, H, T, D] view of a [B, T, H, D] buffer: transpose(1, 2) is contiguous.
  Tensor q = randn({2, 3, 5, 4}, 500), k = randn({2, 3, 5, 4}, 501), v = randn({2, 3, 5, 4}, 502);
  Tensor out = attention(q, k, v);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5, 4}));
  EXPECT_TRUE(transpose(out, 1, 2).is_contiguous());
}

TEST(Attention, FirstCausalRowCopiesFirstValue) {
  // Query 0 sees only key 0, so its output is v[0] exactly (probability 1).
  Tensor q = randn({1, 2, 4, 8}, 510), k = randn({1, 2, 4, 8}, 511), v = randn({1, 2, 4, 8}, 512);
  Tensor out = attention(q, k, v, true);
  const std::vector<double> o = to_double(out), vv = to_double(v);
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 8; ++d) EXPECT_EQ(o[(h * 4) * 8 + d], vv[(h * 4) * 8 + d]);
}

TEST(Attention, ShapeErrors) {
  Tensor q = randn({2, 3, 5, 4}, 1);
  EXPECT_ERROR_CONTAINS(attention(q, randn({2, 3, 6, 4}, 2), randn({2, 3, 5, 4}, 3)),
                        "[2, 3, 6, 4]");
  EXPECT_ERROR_CONTAINS(attention(q, randn({2, 3, 5, 4}, 2), randn({2, 3, 5, 8}, 3)), "value");
  EXPECT_ERROR_CONTAINS(attention(randn({3, 5, 4}, 1), randn({3, 5, 4}, 2), randn({3, 5, 4}, 3)),
                        "f32[3, 5, 4]");
}

TEST(CausalSelfAttention, NonDivisibleHeadsNamesWidthAndHeads) {
  EXPECT_ERROR_CONTAINS(causal_self_attention(randn({1, 4, 30}, 1), 3),
                        "width 10 is not divisible by 3 heads");
  EXPECT_ERROR_CONTAINS(causal_self_attention(randn({1, 4, 31}, 1), 1), "[1, 4, 31]");
  EXPECT_ERROR_CONTAINS(causal_self_attention(randn({1, 4, 30}, 1), 0), "0 heads");
}

// The fused op must agree exactly with attention on q/k/v split out of qkv by views: the same
// kernel sees the same values under the same strides.
TEST(CausalSelfAttention, EqualsAttentionOnSplitViews) {
  const int64_t B = 2, T = 37, H = 3, D = 8, C = H * D;
  Tensor base = randn({B, T, 3 * C}, 600);
  Tensor fused_in = base.clone().set_requires_grad(true);
  Tensor split_in = base.clone().set_requires_grad(true);
  Tensor g = randn({B, T, C}, 601);

  Tensor fused = causal_self_attention(fused_in, H);
  fused.backward(g);

  auto heads = [&](int part) {
    return transpose(reshape(narrow(split_in, 2, part * C, C), {B, T, H, D}), 1, 2);
  };
  Tensor split = reshape(transpose(attention(heads(0), heads(1), heads(2), true), 1, 2), {B, T, C});
  split.backward(g);

  EXPECT_TRUE(all_close(fused, split, 0, 0));
  EXPECT_TRUE(all_close(fused_in.grad(), split_in.grad(), 0, 0));
}

}  // namespace
}  // namespace braid::testing
