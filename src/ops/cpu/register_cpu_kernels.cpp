// The CPU backend's entries in the kernel table: one line per kernel.
#include "braid/ops/kernel_registry.h"
#include "ops/cpu/cpu_kernels.h"

namespace braid::ops {

void register_cpu_kernels(KernelRegistry& r) {
  constexpr DeviceKind kCpu = DeviceKind::cpu;
  r.add<CopyKernel>(kCpu, cpu::copy);
  r.add<FillKernel>(kCpu, cpu::fill);
  r.add<BinaryKernel>(kCpu, cpu::binary);
  r.add<AffineKernel>(kCpu, cpu::affine);
  r.add<SumToKernel>(kCpu, cpu::sum_to);
  r.add<SumKernel>(kCpu, cpu::sum);
  r.add<GemmKernel>(kCpu, cpu::gemm);
  r.add<LinearBiasKernel>(kCpu, cpu::linear_bias);
  r.add<GemmPairKernel>(kCpu, cpu::gemm_pair);
  r.add<GeluForwardKernel>(kCpu, cpu::gelu_forward);
  r.add<GeluBackwardKernel>(kCpu, cpu::gelu_backward);
  r.add<SoftmaxForwardKernel>(kCpu, cpu::softmax_forward);
  r.add<SoftmaxBackwardKernel>(kCpu, cpu::softmax_backward);
  r.add<LayerNormForwardKernel>(kCpu, cpu::layer_norm_forward);
  r.add<LayerNormBackwardKernel>(kCpu, cpu::layer_norm_backward);
  r.add<AttentionForwardKernel>(kCpu, cpu::attention_forward);
  r.add<AttentionBackwardKernel>(kCpu, cpu::attention_backward);
  r.add<EmbeddingForwardKernel>(kCpu, cpu::embedding_forward);
  r.add<EmbeddingBackwardKernel>(kCpu, cpu::embedding_backward);
  r.add<CrossEntropyForwardKernel>(kCpu, cpu::cross_entropy_forward);
  r.add<CrossEntropyBackwardKernel>(kCpu, cpu::cross_entropy_backward);
  r.add<CrossEntropyFusedKernel>(kCpu, cpu::cross_entropy_fused);
  r.add<VocabShardMaxKernel>(kCpu, cpu::vocab_shard_max);
  r.add<VocabShardSumExpKernel>(kCpu, cpu::vocab_shard_sum_exp);
  r.add<VocabShardBackwardKernel>(kCpu, cpu::vocab_shard_backward);
  r.add<VocabShardTargetsKernel>(kCpu, cpu::vocab_shard_targets);
  r.add<VocabShardLossKernel>(kCpu, cpu::vocab_shard_loss);
  r.add<VocabShardIdsKernel>(kCpu, cpu::vocab_shard_ids);
  r.add<AdamWKernel>(kCpu, cpu::adamw);
  r.add<AdamWGroupKernel>(kCpu, cpu::adamw_group);
  r.add<SgdKernel>(kCpu, cpu::sgd);
  r.add<GradNormKernel>(kCpu, cpu::grad_norm);
  r.add<GradSquaresKernel>(kCpu, cpu::grad_squares);
  r.add<ClipFromSquaresKernel>(kCpu, cpu::clip_from_squares);
  r.add<StepVerdictKernel>(kCpu, cpu::step_verdict);
  r.add<AdamWGroupDeviceKernel>(kCpu, cpu::adamw_group_device);
}

}  // namespace braid::ops
