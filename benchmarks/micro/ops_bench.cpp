// Google Benchmark micro benchmarks of the CPU op layer against raw sgemm calls and memcpy.
//   braid_micro_bench --benchmark_out=micro.json --benchmark_out_format=json
// matmul through braid vs raw sgemm shows the op layer's overhead; AdamW's bytes/s next to
// memcpy's shows how close the update is to the memory-bandwidth floor (7 f32 streams).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/core/generator.h"
#include "braid/ops.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "ops/cpu/sgemm_backend.h"
#include "support/bench_support.h"

namespace {

using braid::Tensor;

Tensor random(const braid::Shape& shape, uint64_t stream) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = braid::normal_at(1, stream, i);
  return t;
}

// GPT-2 124M shapes: the MLP fc of 256 tokens, and the tied LM head.
void gemm_args(benchmark::internal::Benchmark* b) {
  b->Args({256, 768, 3072})->Args({256, 768, 50304})->Args({1024, 256, 1024});
}

void BM_MatmulOp(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor x = random({m, k}, 1), w = random({n, k}, 2);
  braid::autograd::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(braid::linear(x, w).data_ptr());
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MatmulOp)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();

// One sgemm call in the row-major convention of braid's GEMM kernel.
using SgemmFn = void (*)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc);

void openblas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

enum class LinearProduct { kForward, kInputGrad, kWeightGrad };

// A linear layer's three products at m rows, in features k, out features n: the forward X W^T,
// the input gradient dY W (both take the whole weight matrix as an operand) and the weight
// gradient dY^T X added into .grad, whose reduction runs over the m rows.
template <LinearProduct kProduct>
void raw_linear_product(benchmark::State& state, SgemmFn sgemm) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor x = random({m, k}, 1), w = random({n, k}, 2), dy = random({m, n}, 3);
  Tensor y = Tensor::empty({m, n}), dx = Tensor::empty({m, k}), dw = Tensor::zeros({n, k});
  for (auto _ : state) {
    switch (kProduct) {
      case LinearProduct::kForward:
        sgemm(false, true, m, n, k, 1.0f, x.data<float>(), k, w.data<float>(), k, 0.0f,
              y.data<float>(), n);
        break;
      case LinearProduct::kInputGrad:
        sgemm(false, false, m, k, n, 1.0f, dy.data<float>(), n, w.data<float>(), k, 0.0f,
              dx.data<float>(), k);
        break;
      case LinearProduct::kWeightGrad:
        sgemm(true, false, n, k, m, 1.0f, dy.data<float>(), n, x.data<float>(), k, 1.0f,
              dw.data<float>(), k);
        break;
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// The library braid's GEMM kernel calls (BRAID_CPU_GEMM), without the op layer; and OpenBLAS.
void BM_RawSgemm(benchmark::State& state) {
  raw_linear_product<LinearProduct::kForward>(state, &braid::ops::cpu::row_major_sgemm);
}
void BM_RawSgemmInputGrad(benchmark::State& state) {
  raw_linear_product<LinearProduct::kInputGrad>(state, &braid::ops::cpu::row_major_sgemm);
}
void BM_RawSgemmWeightGrad(benchmark::State& state) {
  raw_linear_product<LinearProduct::kWeightGrad>(state, &braid::ops::cpu::row_major_sgemm);
}
void BM_OpenBlasSgemm(benchmark::State& state) {
  raw_linear_product<LinearProduct::kForward>(state, &openblas_sgemm);
}
void BM_OpenBlasSgemmInputGrad(benchmark::State& state) {
  raw_linear_product<LinearProduct::kInputGrad>(state, &openblas_sgemm);
}
void BM_OpenBlasSgemmWeightGrad(benchmark::State& state) {
  raw_linear_product<LinearProduct::kWeightGrad>(state, &openblas_sgemm);
}
BENCHMARK(BM_RawSgemm)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RawSgemmInputGrad)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RawSgemmWeightGrad)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenBlasSgemm)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenBlasSgemmInputGrad)
    ->Apply(gemm_args)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_OpenBlasSgemmWeightGrad)
    ->Apply(gemm_args)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Causal attention forward + backward on [B, H, T, D] = [4, 12, 64, 64] and [8, 4, 128, 64].
void BM_Attention(benchmark::State& state) {
  const int64_t b = state.range(0), h = state.range(1), t = state.range(2), d = state.range(3);
  Tensor q = random({b, h, t, d}, 3), k = random({b, h, t, d}, 4), v = random({b, h, t, d}, 5);
  q.set_requires_grad(true);
  k.set_requires_grad(true);
  v.set_requires_grad(true);
  for (auto _ : state) {
    Tensor out = braid::attention(q, k, v, true);
    braid::sum(out).backward();
  }
  // Causal: half of the 4 * B * H * T^2 * D forward and 8 * ... backward FLOPs.
  state.counters["GFLOP/s"] = benchmark::Counter(0.5 * 12.0 * b * h * t * t * d,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Attention)
    ->Args({4, 12, 64, 64})
    ->Args({8, 4, 128, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), c = state.range(1);
  Tensor x = random({rows, c}, 6), w = random({c}, 7), bias = random({c}, 8);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  for (auto _ : state) braid::sum(braid::layer_norm(x, w, bias)).backward();
  state.SetBytesProcessed(state.iterations() * rows * c * 4 * 5);
}
BENCHMARK(BM_LayerNorm)
    ->Args({256, 768})
    ->Args({1024, 256})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// GELU forward + backward on the MLP's hidden activations of config a ([256, 3072]) and b
// ([1024, 1024]). Bytes: x read and y written (forward); x and dy read, dx written (backward).
void BM_Gelu(benchmark::State& state) {
  const int64_t rows = state.range(0), c = state.range(1);
  Tensor x = random({rows, c}, 9);
  x.set_requires_grad(true);
  for (auto _ : state) braid::sum(braid::gelu(x)).backward();
  state.SetBytesProcessed(state.iterations() * rows * c * 4 * 5);
}
BENCHMARK(BM_Gelu)
    ->Args({256, 3072})
    ->Args({1024, 1024})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The fused cross-entropy kernels on the LM head's logits [rows, 50304] (50257 real classes):
// 256 rows is config a of cpu_vs_torch.sh, 1024 rows config b. Bytes: logits read (forward);
// logits read and their gradient written (backward, and forward + backward fused).
struct CrossEntropyCase {
  Tensor logits, targets, losses, lse, dlogits;
  static constexpr int64_t kClasses = 50257, kPadded = 50304;
  explicit CrossEntropyCase(int64_t rows)
      : logits(random({rows, kPadded}, 9)),
        losses(Tensor::empty({rows})),
        lse(Tensor::empty({rows})),
        dlogits(Tensor::empty({rows, kPadded})) {
    std::vector<int32_t> ids(rows);
    for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>(i * 7919 % kClasses);
    targets = Tensor::from_vector(ids, {rows});
  }
  void forward() {
    braid::ops::kernel<braid::ops::CrossEntropyForwardKernel>(braid::Device::cpu())(
        logits, targets, kClasses, -100, losses, lse);
  }
};

void BM_CrossEntropyForward(benchmark::State& state) {
  CrossEntropyCase c(state.range(0));
  for (auto _ : state) c.forward();
  state.SetBytesProcessed(state.iterations() * c.logits.nbytes());
}
BENCHMARK(BM_CrossEntropyForward)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_CrossEntropyBackward(benchmark::State& state) {
  CrossEntropyCase c(state.range(0));
  c.forward();
  const auto backward =
      braid::ops::kernel<braid::ops::CrossEntropyBackwardKernel>(braid::Device::cpu());
  for (auto _ : state)
    backward(c.logits, c.targets, c.lse, c.kClasses, -100, 1.0f / 1024, c.dlogits);
  state.SetBytesProcessed(state.iterations() * 2 * c.logits.nbytes());
}
BENCHMARK(BM_CrossEntropyBackward)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Forward and backward in one sweep (what the op runs when the loss will be backpropagated).
void BM_CrossEntropyFused(benchmark::State& state) {
  CrossEntropyCase c(state.range(0));
  const auto fused = braid::ops::kernel<braid::ops::CrossEntropyFusedKernel>(braid::Device::cpu());
  for (auto _ : state)
    fused(c.logits, c.targets, c.kClasses, -100, 1.0f / 1024, c.losses, c.dlogits);
  state.SetBytesProcessed(state.iterations() * 2 * c.logits.nbytes());
}
BENCHMARK(BM_CrossEntropyFused)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same with the gradient written over the logits, as cross_entropy does for logits the
// caller gives up. From the second iteration on the inputs are the previous gradients; the
// kernel does the same work on any finite values.
void BM_CrossEntropyFusedInPlace(benchmark::State& state) {
  CrossEntropyCase c(state.range(0));
  const auto fused = braid::ops::kernel<braid::ops::CrossEntropyFusedKernel>(braid::Device::cpu());
  for (auto _ : state)
    fused(c.logits, c.targets, c.kClasses, -100, 1.0f / 1024, c.losses, c.logits);
  state.SetBytesProcessed(state.iterations() * 2 * c.logits.nbytes());
}
BENCHMARK(BM_CrossEntropyFusedInPlace)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// AdamW over n parameters: reads p, g, m, v and writes p, m, v (7 streams of 4 bytes).
void BM_AdamW(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor p = Tensor::full({n}, 0.5f), g = Tensor::full({n}, 0.01f);
  Tensor m = Tensor::zeros({n}), v = Tensor::zeros({n});
  const auto adamw = braid::ops::kernel<braid::ops::AdamWKernel>(braid::Device::cpu());
  int64_t step = 0;
  for (auto _ : state) {
    const braid::ops::AdamWHyper hyper{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++step};
    adamw(p, g, m, v, hyper, 1.0f);
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * 7);
}
BENCHMARK(BM_AdamW)->Arg(124'475'904)->Unit(benchmark::kMillisecond)->UseRealTime();

// AdamW over 8M parameters in tiles of state.range(0) elements (the overlapped checkpoint's
// replay works in 16K tiles, below the kernel's threading threshold): bytes/s should match a
// single-threaded whole pass, which needs the vector loop also below the threshold.
void BM_AdamWInTiles(benchmark::State& state) {
  const int64_t n = 8 << 20, tile = state.range(0);
  Tensor p = Tensor::full({n}, 0.5f), g = Tensor::full({n}, 0.01f);
  Tensor m = Tensor::zeros({n}), v = Tensor::zeros({n});
  const auto adamw = braid::ops::kernel<braid::ops::AdamWKernel>(braid::Device::cpu());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  int64_t step = 0;
  for (auto _ : state) {
    const braid::ops::AdamWHyper hyper{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++step};
    for (int64_t begin = 0; begin < n; begin += tile) {
      const int64_t length = std::min(tile, n - begin);
      Tensor pt = p.narrow(0, begin, length), mt = m.narrow(0, begin, length);
      Tensor vt = v.narrow(0, begin, length);
      adamw(pt, g.narrow(0, begin, length), mt, vt, hyper, 1.0f);
    }
  }
  omp_set_num_threads(threads);
  state.SetBytesProcessed(state.iterations() * n * 4 * 7);
}
BENCHMARK(BM_AdamWInTiles)->Arg(16384)->Arg(8 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

// The floor AdamW is compared with: a large memcpy (2 streams) on all threads.
void BM_Memcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  for (auto _ : state) {
#pragma omp parallel
    {
      const int nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t b = n * t / nt, e = n * (t + 1) / nt;
      std::memcpy(dst.data() + b, src.data() + b, (e - b) * sizeof(float));
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * 2);
}
BENCHMARK(BM_Memcpy)->Arg(124'475'904)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// BENCHMARK_MAIN with the run's facts in the JSON context (the command before Google
// Benchmark takes its flags out of argv), which docs/performance.md shows beside the results.
int main(int argc, char** argv) {
  const braid::bench::RunFacts facts = braid::bench::run_facts(argc, argv);
  benchmark::AddCustomContext("command", facts.command);
  benchmark::AddCustomContext("cpu", facts.cpu);
  benchmark::AddCustomContext("threads", std::to_string(facts.threads));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
