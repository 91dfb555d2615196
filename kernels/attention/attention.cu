// CUDA attention: online-softmax forward, and a two-pass atomic-free backward.
#include "attention/attention.cuh"

#include <limits>

#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "device_reduce.cuh"
#include "launch_config.h"
#include "tensor_checks.h"

namespace braid::cuda {
namespace {

constexpr int kThreads = kAttentionThreads;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kQueryTile = kAttentionQueryTile;
constexpr int kKeyTile = kAttentionKeyTile;
constexpr int kRowsPerWarp = kQueryTile / kWarps;
constexpr int kDimsPerLane = kAttentionMaxHeadDim / kWarpSize;
constexpr int kScoreLd = kKeyTile + 1;  // padded rows of the P / dS tiles
// Elements of a key tile's dk (or dv) and of a query tile's dq each thread owns.
constexpr int kKeyElemsPerThread = kKeyTile * kAttentionMaxHeadDim / kThreads;
constexpr int kQueryElemsPerThread = kQueryTile * kAttentionMaxHeadDim / kThreads;
static_assert(kRowsPerWarp * kWarps == kQueryTile && kKeyTile == kWarpSize);
// Above this a kernel must opt in to more dynamic shared memory.
constexpr size_t kDefaultSmemLimit = 48 * 1024;

// Rows of a [B, H, T, D] view with unit stride in D.
template <class T>
struct HeadView {
  T* base;
  int64_t sb, sh, st;
  __device__ T* row(int b, int h, int t) const { return base + b * sb + h * sh + t * st; }
};

template <class T>
HeadView<T> head_view(const Tensor& t) {
  return {static_cast<T*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

struct ForwardParams {
  HeadView<const float> q, k, v;
  HeadView<float> out;
  float* lse;  // dense [B, H, T]
  int H, T, D;
  float scale;
  bool causal;
};

struct BackwardParams {
  HeadView<const float> q, k, v, dout;
  const float* lse;    // dense [B, H, T]
  const float* delta;  // dense [B, H, T]: rowsum(dout * out)
  HeadView<float> dq, dk, dv;
  int H, T, D;
  float scale;
  bool causal;
};

// Key (or value) rows [j0, j0 + kKeyTile) into tile[j * (D + 1) + d]; zeros past T. The +1
// padding puts lane j's element d in bank (j + d) % 32 when D is a multiple of 32 (the usual
// head sizes), so the per-lane dot products read without bank conflicts.
__device__ void load_key_tile(const HeadView<const float>& src, int b, int h, int j0, int T, int D,
                              float* tile) {
  const int ld = D + 1;
  for (int e = threadIdx.x; e < kKeyTile * D; e += kThreads) {
    const int j = e / D, d = e % D;
    tile[j * ld + d] = j0 + j < T ? src.row(b, h, j0 + j)[d] : 0.0f;
  }
}

// ---- forward -------------------------------------------------------------------------------

size_t forward_smem_floats(int D) {
  return 2 * kKeyTile * (D + 1) + kQueryTile * D;
}

// Warp w owns query rows w * kRowsPerWarp ..; per row it keeps the running max m, the running
// sum l and kDimsPerLane output dims (d = lane + 32 * x) in registers. Per key tile, lane j
// scores key j, then the probabilities are broadcast lane by lane into the accumulators (key
// order, like the CPU). Every branch that skips a row is uniform across the warp.
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(ForwardParams p) {
  extern __shared__ float smem[];
  const int D = p.D, ld = D + 1;
  float* k_tile = smem;
  float* v_tile = k_tile + kKeyTile * ld;
  float* q_tile = v_tile + kKeyTile * ld;  // [kQueryTile][D], pre-scaled like the CPU's qs
  const int bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  const int i0 = blockIdx.y * kQueryTile;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  for (int e = threadIdx.x; e < kQueryTile * D; e += kThreads) {
    const int r = e / D, d = e % D;
    q_tile[e] = i0 + r < p.T ? p.q.row(b, h, i0 + r)[d] * p.scale : 0.0f;
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int x = 0; x < kDimsPerLane; ++x) acc[rr][x] = 0.0f;
  }

  const int key_end = p.causal ? min(p.T, i0 + kQueryTile) : p.T;
  for (int j0 = 0; j0 < key_end; j0 += kKeyTile) {
    __syncthreads();  // the previous tile is consumed (first pass: q_tile is written)
    load_key_tile(p.k, b, h, j0, p.T, D, k_tile);
    load_key_tile(p.v, b, h, j0, p.T, D, v_tile);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr, i = i0 + r;
      if (i >= p.T) continue;
      const int visible = p.causal ? min(kKeyTile, i - j0 + 1) : min(kKeyTile, p.T - j0);
      if (visible <= 0) continue;  // a causal row that sees none of this tile
      float s = -INFINITY;
      if (lane < visible) {
        const float* qr = q_tile + r * D;
        const float* kr = k_tile + lane * ld;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qr[d] * kr[d];
        s = dot;
      }
      // Key j0 is always visible, so m_new is finite; on the first tile m is -inf and the
      // correction exp(-inf) = 0 clears the (zero) state.
      const float m_new = fmaxf(m[rr], warp_max(s));
      const float correction = expf(m[rr] - m_new);
      const float prob = lane < visible ? expf(s - m_new) : 0.0f;
      l[rr] = l[rr] * correction + warp_sum(prob);
      m[rr] = m_new;
#pragma unroll
      for (int x = 0; x < kDimsPerLane; ++x) acc[rr][x] *= correction;
      for (int j = 0; j < visible; ++j) {
        const float pj = __shfl_sync(kFullMask, prob, j);
        const float* vr = v_tile + j * ld;
#pragma unroll
        for (int x = 0; x < kDimsPerLane; ++x) {
          const int d = lane + kWarpSize * x;
          if (d < D) acc[rr][x] += pj * vr[d];
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int i = i0 + warp * kRowsPerWarp + rr;
    if (i >= p.T) continue;
    const float inv = 1.0f / l[rr];
    float* o = p.out.row(b, h, i);
#pragma unroll
    for (int x = 0; x < kDimsPerLane; ++x) {
      const int d = lane + kWarpSize * x;
      if (d < D) o[d] = acc[rr][x] * inv;
    }
    if (lane == 0) p.lse[static_cast<int64_t>(bh) * p.T + i] = m[rr] + logf(l[rr]);
  }
}

// ---- backward --------------------------------------------------------------------------------

// delta[row] = dout[row] . out[row]: the softmax-backward term shared by a query's keys.
// One warp per (batch, head, query) row.
__global__ void attention_delta_kernel(HeadView<const float> out, HeadView<const float> dout, int H,
                                       int T, int D, int64_t rows, float* delta) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarpSize;
       row < rows; row += warps) {
    const int bh = static_cast<int>(row / T), i = static_cast<int>(row % T);
    const float* o = out.row(bh / H, bh % H, i);
    const float* g = dout.row(bh / H, bh % H, i);
    float acc = 0.0f;
    for (int d = lane; d < D; d += kWarpSize) acc += g[d] * o[d];
    acc = warp_sum(acc);
    if (lane == 0) delta[row] = acc;
  }
}

size_t backward_smem_floats(int D) {
  return 2 * kKeyTile * (D + 1) + 2 * kQueryTile * D + 2 * kQueryTile * kScoreLd + 2 * kQueryTile;
}

// The backward kernels' shared memory, carved in one place so both agree.
struct BackwardTiles {
  float *k, *v, *q, *dout, *p, *ds, *lse, *delta;
};

__device__ BackwardTiles carve_backward_tiles(float* smem, int D) {
  BackwardTiles t;
  t.k = smem;
  t.v = t.k + kKeyTile * (D + 1);
  t.q = t.v + kKeyTile * (D + 1);        // [kQueryTile][D], raw (dk needs unscaled q)
  t.dout = t.q + kQueryTile * D;         // [kQueryTile][D]
  t.p = t.dout + kQueryTile * D;         // [kQueryTile][kScoreLd]
  t.ds = t.p + kQueryTile * kScoreLd;    // [kQueryTile][kScoreLd]
  t.lse = t.ds + kQueryTile * kScoreLd;  // [kQueryTile]
  t.delta = t.lse + kQueryTile;          // [kQueryTile]
  return t;
}

// Query rows [i0, i0 + kQueryTile) of q and dout, with their lse and delta; zeros past T.
__device__ void load_query_tile(const BackwardParams& p, int b, int h, int i0,
                                const BackwardTiles& t) {
  const int D = p.D;
  for (int e = threadIdx.x; e < kQueryTile * D; e += kThreads) {
    const int r = e / D, d = e % D, i = i0 + r;
    t.q[e] = i < p.T ? p.q.row(b, h, i)[d] : 0.0f;
    t.dout[e] = i < p.T ? p.dout.row(b, h, i)[d] : 0.0f;
  }
  const int64_t base = (static_cast<int64_t>(b) * p.H + h) * p.T;
  for (int r = threadIdx.x; r < kQueryTile; r += kThreads) {
    const int i = i0 + r;
    t.lse[r] = i < p.T ? p.lse[base + i] : 0.0f;
    t.delta[r] = i < p.T ? p.delta[base + i] : 0.0f;
  }
}

// P[r][j] = exp(q_i . k_j * scale - lse_i) and dS[r][j] = P * (dout_i . v_j - delta_i) * scale
// for the loaded query and key tiles (0 where masked or past T); lane j handles key j.
__device__ void tile_probabilities(const BackwardParams& p, int i0, int j0,
                                   const BackwardTiles& t) {
  const int D = p.D, ld = D + 1;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int j = j0 + lane;
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr, i = i0 + r;
    float prob = 0.0f, ds = 0.0f;
    if (i < p.T && j < p.T && (!p.causal || j <= i)) {
      const float* qr = t.q + r * D;
      const float* gr = t.dout + r * D;
      const float* kr = t.k + lane * ld;
      const float* vr = t.v + lane * ld;
      float s = 0.0f, dp = 0.0f;
      for (int d = 0; d < D; ++d) {
        s += (qr[d] * p.scale) * kr[d];
        dp += gr[d] * vr[d];
      }
      prob = expf(s - t.lse[r]);
      ds = prob * (dp - t.delta[r]) * p.scale;
    }
    t.p[r * kScoreLd + lane] = prob;
    t.ds[r * kScoreLd + lane] = ds;
  }
}

// One block per (batch * head, tile of keys): dv_j = sum_i P_ij dout_i, dk_j = sum_i dS_ij q_i,
// over every query i in increasing order. Thread t owns elements e = t + kThreads * x of the
// [kKeyTile, D] tile.
__global__ void __launch_bounds__(kThreads) attention_backward_dkv_kernel(BackwardParams p) {
  extern __shared__ float smem[];
  const int D = p.D;
  const BackwardTiles t = carve_backward_tiles(smem, D);
  const int bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  const int j0 = blockIdx.y * kKeyTile;
  load_key_tile(p.k, b, h, j0, p.T, D, t.k);
  load_key_tile(p.v, b, h, j0, p.T, D, t.v);
  float dk[kKeyElemsPerThread], dv[kKeyElemsPerThread];
#pragma unroll
  for (int x = 0; x < kKeyElemsPerThread; ++x) dk[x] = dv[x] = 0.0f;

  // Causal: queries before j0 see none of these keys.
  const int first = p.causal ? j0 / kQueryTile * kQueryTile : 0;
  for (int i0 = first; i0 < p.T; i0 += kQueryTile) {
    __syncthreads();  // the previous query tile's P / dS are consumed
    load_query_tile(p, b, h, i0, t);
    __syncthreads();
    tile_probabilities(p, i0, j0, t);
    __syncthreads();
#pragma unroll
    for (int x = 0; x < kKeyElemsPerThread; ++x) {
      const int e = threadIdx.x + kThreads * x;
      if (e < kKeyTile * D) {
        const int jj = e / D, d = e % D;
        float sum_k = dk[x], sum_v = dv[x];
        for (int r = 0; r < kQueryTile; ++r) {
          sum_v += t.p[r * kScoreLd + jj] * t.dout[r * D + d];
          sum_k += t.ds[r * kScoreLd + jj] * t.q[r * D + d];
        }
        dk[x] = sum_k;
        dv[x] = sum_v;
      }
    }
  }
#pragma unroll
  for (int x = 0; x < kKeyElemsPerThread; ++x) {
    const int e = threadIdx.x + kThreads * x;
    if (e < kKeyTile * D) {
      const int jj = e / D, d = e % D;
      if (j0 + jj < p.T) {
        p.dk.row(b, h, j0 + jj)[d] = dk[x];
        p.dv.row(b, h, j0 + jj)[d] = dv[x];
      }
    }
  }
}

// One block per (batch * head, tile of queries): dq_i = sum_j dS_ij k_j over every visible key
// in increasing order. Thread t owns elements e = t + kThreads * x of the [kQueryTile, D] tile.
__global__ void __launch_bounds__(kThreads) attention_backward_dq_kernel(BackwardParams p) {
  extern __shared__ float smem[];
  const int D = p.D, ld = D + 1;
  const BackwardTiles t = carve_backward_tiles(smem, D);
  const int bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  const int i0 = blockIdx.y * kQueryTile;
  load_query_tile(p, b, h, i0, t);
  float dq[kQueryElemsPerThread];
#pragma unroll
  for (int x = 0; x < kQueryElemsPerThread; ++x) dq[x] = 0.0f;

  const int key_end = p.causal ? min(p.T, i0 + kQueryTile) : p.T;
  for (int j0 = 0; j0 < key_end; j0 += kKeyTile) {
    __syncthreads();  // the previous key tile and its dS are consumed
    load_key_tile(p.k, b, h, j0, p.T, D, t.k);
    load_key_tile(p.v, b, h, j0, p.T, D, t.v);
    __syncthreads();
    tile_probabilities(p, i0, j0, t);
    __syncthreads();
#pragma unroll
    for (int x = 0; x < kQueryElemsPerThread; ++x) {
      const int e = threadIdx.x + kThreads * x;
      if (e < kQueryTile * D) {
        const int r = e / D, d = e % D;
        float sum = dq[x];
        for (int j = 0; j < kKeyTile; ++j) sum += t.ds[r * kScoreLd + j] * t.k[j * ld + d];
        dq[x] = sum;
      }
    }
  }
#pragma unroll
  for (int x = 0; x < kQueryElemsPerThread; ++x) {
    const int e = threadIdx.x + kThreads * x;
    if (e < kQueryTile * D) {
      const int r = e / D, d = e % D;
      if (i0 + r < p.T) p.dq.row(b, h, i0 + r)[d] = dq[x];
    }
  }
}

// Lets `kernel` use `bytes` of dynamic shared memory when that exceeds the default 48 KiB.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  if (bytes > kDefaultSmemLimit)
    BRAID_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

void launch_attention_forward(const ForwardParams& p, const AttentionLaunch& plan,
                              cudaStream_t stream) {
  allow_smem(attention_forward_kernel, plan.forward_smem_bytes);
  const dim3 grid(static_cast<unsigned>(plan.heads), static_cast<unsigned>(plan.query_tiles));
  attention_forward_kernel<<<grid, kThreads, plan.forward_smem_bytes, stream>>>(p);
  BRAID_CUDA_CHECK_LAUNCH();
}

void launch_attention_backward(BackwardParams p, HeadView<const float> out,
                               const AttentionLaunch& plan, cudaStream_t stream) {
  const int64_t rows = plan.heads * p.T;
  ScratchBuffer delta(sizeof(float) * static_cast<size_t>(rows), stream);
  p.delta = delta.as<float>();
  attention_delta_kernel<<<grid_1d(rows * kWarpSize), kThreadsPerBlock, 0, stream>>>(
      out, p.dout, p.H, p.T, p.D, rows, delta.as<float>());
  BRAID_CUDA_CHECK_LAUNCH();
  allow_smem(attention_backward_dkv_kernel, plan.backward_smem_bytes);
  allow_smem(attention_backward_dq_kernel, plan.backward_smem_bytes);
  const dim3 key_grid(static_cast<unsigned>(plan.heads), static_cast<unsigned>(plan.key_tiles));
  attention_backward_dkv_kernel<<<key_grid, kThreads, plan.backward_smem_bytes, stream>>>(p);
  BRAID_CUDA_CHECK_LAUNCH();
  const dim3 query_grid(static_cast<unsigned>(plan.heads), static_cast<unsigned>(plan.query_tiles));
  attention_backward_dq_kernel<<<query_grid, kThreads, plan.backward_smem_bytes, stream>>>(p);
  BRAID_CUDA_CHECK_LAUNCH();
}

// Checks a [B, H, T, D] operand: f32, on q's device, q's shape, unit stride in D.
void check_heads(const Tensor& t, const Tensor& q, const char* op, const char* role, bool written) {
  check_cuda_tensor(t, op, role);
  check_same_device(t, q, op, role, "q");
  check_shape(t, q.shape(), op, role);
  check_unit_inner(t, op, role);
  if (written) check_writable(t, op, role);
}

// Checks q's own layout and the [B, H, T] lse; returns the launch plan.
AttentionLaunch check_problem(const Tensor& q, const Tensor& lse, const char* op) {
  check_cuda_tensor(q, op, "q");
  BRAID_CHECK(q.dim() == 4, "{} (cuda): q must be [B, H, T, D], got {}", op, q.str());
  check_unit_inner(q, op, "q");
  check_cuda_tensor(lse, op, "lse");
  check_same_device(lse, q, op, "lse", "q");
  check_shape(lse, {q.size(0), q.size(1), q.size(2)}, op, "lse");
  check_contiguous(lse, op, "lse");
  return plan_attention(q.size(0), q.size(1), q.size(2), q.size(3));
}

}  // namespace

AttentionLaunch plan_attention(int64_t batch, int64_t heads, int64_t tokens, int64_t head_dim) {
  BRAID_CHECK(head_dim >= 1 && head_dim <= kAttentionMaxHeadDim,
              "attention (cuda): head dim {} is outside [1, {}] (the CUDA kernel keeps a row's "
              "output in {} registers per lane)",
              head_dim, kAttentionMaxHeadDim, kDimsPerLane);
  AttentionLaunch plan;
  plan.heads = batch * heads;
  plan.query_tiles = ceil_div(tokens, kQueryTile);
  plan.key_tiles = ceil_div(tokens, kKeyTile);
  BRAID_CHECK(plan.heads <= std::numeric_limits<int>::max() && tokens <= (int64_t{1} << 30),
              "attention (cuda): {} heads x {} tokens exceeds the kernel's int indexing",
              plan.heads, tokens);
  BRAID_CHECK(plan.query_tiles <= 65535,
              "attention (cuda): {} tokens need {} query tiles; the grid allows 65535", tokens,
              plan.query_tiles);
  plan.forward_smem_bytes = sizeof(float) * forward_smem_floats(static_cast<int>(head_dim));
  plan.backward_smem_bytes = sizeof(float) * backward_smem_floats(static_cast<int>(head_dim));
  return plan;
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale,
                       Tensor& out, Tensor& lse) {
  constexpr const char* kOp = "attention_forward";
  const AttentionLaunch plan = check_problem(q, lse, kOp);
  check_heads(k, q, kOp, "k", false);
  check_heads(v, q, kOp, "v", false);
  check_heads(out, q, kOp, "out", true);
  if (plan.heads == 0 || q.size(2) == 0) return;
  ForwardParams p{head_view<const float>(q),
                  head_view<const float>(k),
                  head_view<const float>(v),
                  head_view<float>(out),
                  static_cast<float*>(lse.data_ptr()),
                  static_cast<int>(q.size(1)),
                  static_cast<int>(q.size(2)),
                  static_cast<int>(q.size(3)),
                  scale,
                  causal};
  DeviceGuard guard(q.device().index);
  launch_attention_forward(p, plan, current_stream());
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  constexpr const char* kOp = "attention_backward";
  const AttentionLaunch plan = check_problem(q, lse, kOp);
  check_heads(k, q, kOp, "k", false);
  check_heads(v, q, kOp, "v", false);
  check_heads(out, q, kOp, "out", false);
  check_heads(dout, q, kOp, "dout", false);
  check_heads(dq, q, kOp, "dq", true);
  check_heads(dk, q, kOp, "dk", true);
  check_heads(dv, q, kOp, "dv", true);
  if (plan.heads == 0 || q.size(2) == 0) return;
  BackwardParams p{head_view<const float>(q),
                   head_view<const float>(k),
                   head_view<const float>(v),
                   head_view<const float>(dout),
                   static_cast<const float*>(lse.data_ptr()),
                   nullptr,  // delta: filled by the launcher
                   head_view<float>(dq),
                   head_view<float>(dk),
                   head_view<float>(dv),
                   static_cast<int>(q.size(1)),
                   static_cast<int>(q.size(2)),
                   static_cast<int>(q.size(3)),
                   scale,
                   causal};
  DeviceGuard guard(q.device().index);
  launch_attention_backward(p, head_view<const float>(out), plan, current_stream());
}

}  // namespace braid::cuda
