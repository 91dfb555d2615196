// The CUDA backend's entries in the kernel table (one line per kernel) and its device memory.
#include "attention/attention.cuh"
#include "braid/ops/kernel_registry.h"
#include "cuda_runtime.cuh"
#include "elementwise/affine.cuh"
#include "elementwise/binary.cuh"
#include "elementwise/copy.cuh"
#include "elementwise/fill.cuh"
#include "elementwise/gelu.cuh"
#include "elementwise/sum.cuh"
#include "elementwise/sum_to.cuh"
#include "embedding/embedding.cuh"
#include "gemm/gemm.cuh"
#include "loss/cross_entropy.cuh"
#include "loss/vocab_parallel_cross_entropy.cuh"
#include "norm/layer_norm.cuh"
#include "norm/softmax.cuh"
#include "optim/adamw.cuh"
#include "optim/grad_norm.cuh"
#include "optim/sgd.cuh"
#include "pinned_memory.h"

namespace braid::ops {

// Called once, while the kernel table is first built (KernelRegistry::instance). Touches no
// CUDA API, so it is safe on machines without a driver; device errors surface at first use.
void register_cuda_kernels(KernelRegistry& r) {
  constexpr DeviceKind kCuda = DeviceKind::cuda;
  cuda::register_device_memory_ops();
  cuda::register_pinned_memory_ops();
  r.add<CopyKernel>(kCuda, &cuda::copy);
  r.add<FillKernel>(kCuda, &cuda::fill);
  r.add<BinaryKernel>(kCuda, &cuda::binary);
  r.add<AffineKernel>(kCuda, &cuda::affine);
  r.add<SumToKernel>(kCuda, &cuda::sum_to);
  r.add<SumKernel>(kCuda, &cuda::sum);
  r.add<GemmKernel>(kCuda, &cuda::gemm);
  r.add<GeluForwardKernel>(kCuda, &cuda::gelu_forward);
  r.add<GeluBackwardKernel>(kCuda, &cuda::gelu_backward);
  r.add<SoftmaxForwardKernel>(kCuda, &cuda::softmax_forward);
  r.add<SoftmaxBackwardKernel>(kCuda, &cuda::softmax_backward);
  r.add<LayerNormForwardKernel>(kCuda, &cuda::layer_norm_forward);
  r.add<LayerNormBackwardKernel>(kCuda, &cuda::layer_norm_backward);
  r.add<AttentionForwardKernel>(kCuda, &cuda::attention_forward);
  r.add<AttentionBackwardKernel>(kCuda, &cuda::attention_backward);
  r.add<EmbeddingForwardKernel>(kCuda, &cuda::embedding_forward);
  r.add<EmbeddingBackwardKernel>(kCuda, &cuda::embedding_backward);
  r.add<CrossEntropyForwardKernel>(kCuda, &cuda::cross_entropy_forward);
  r.add<CrossEntropyBackwardKernel>(kCuda, &cuda::cross_entropy_backward);
  r.add<VocabShardMaxKernel>(kCuda, &cuda::vocab_shard_max);
  r.add<VocabShardSumExpKernel>(kCuda, &cuda::vocab_shard_sum_exp);
  r.add<VocabShardBackwardKernel>(kCuda, &cuda::vocab_shard_backward);
  r.add<VocabShardTargetsKernel>(kCuda, &cuda::vocab_shard_targets);
  r.add<VocabShardLossKernel>(kCuda, &cuda::vocab_shard_loss);
  r.add<VocabShardIdsKernel>(kCuda, &cuda::vocab_shard_ids);
  r.add<AdamWKernel>(kCuda, &cuda::adamw);
  r.add<AdamWGroupKernel>(kCuda, &cuda::adamw_group);
  r.add<SgdKernel>(kCuda, &cuda::sgd);
  r.add<GradNormKernel>(kCuda, &cuda::grad_norm);
  r.add<GradSquaresKernel>(kCuda, &cuda::grad_squares);
  r.add<ClipFromSquaresKernel>(kCuda, &cuda::clip_from_squares);
  r.add<StepVerdictKernel>(kCuda, &cuda::step_verdict);
  r.add<AdamWGroupDeviceKernel>(kCuda, &cuda::adamw_group_device);
}

}  // namespace braid::ops
