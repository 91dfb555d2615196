// The signature of every kernel a backend can provide, one struct per kernel.
//
// Conventions: inputs are const&, outputs are preallocated by the op layer and passed as
// Tensor& (dense unless stated). Kernels never record autograd history and never allocate
// outputs, so backends stay simple and the op layer owns shapes and errors.
#pragma once

#include <cstdint>
#include <span>

#include "braid/core/tensor.h"

namespace braid::ops {

enum class BinaryOp : uint8_t { add, sub, mul, div };

#define BRAID_KERNEL_SIGNATURE(Struct, op_name, ...) \
  struct Struct {                                    \
    static constexpr const char* kName = op_name;    \
    using Fn = void (*)(__VA_ARGS__);                \
  }

// dst = src element for element (equal shapes, one device), what Tensor::copy_ runs within a
// device: any strides (src may broadcast through zero strides, dst may not), any two dtypes.
// One dtype copies bits; i32 <-> i64 converts exactly; everything else goes through f32
// (bf16/f16 rounded to nearest even, NaN kept quiet). A dense copy of one dtype may overlap
// (memmove); other overlaps of src and dst are undefined.
BRAID_KERNEL_SIGNATURE(CopyKernel, "copy", const Tensor& src, Tensor& dst);
// Every element of out (any layout without zero strides, any dtype) = value, converted to
// out's dtype as CopyKernel converts an f32.
BRAID_KERNEL_SIGNATURE(FillKernel, "fill", float value, Tensor& out);

// out = a (op) b, where a and b are already broadcast to out's shape (stride-0 dims allowed).
BRAID_KERNEL_SIGNATURE(BinaryKernel, "binary", BinaryOp op, const Tensor& a, const Tensor& b,
                       Tensor& out);
// out = alpha * x + beta (x and out dense, may alias).
BRAID_KERNEL_SIGNATURE(AffineKernel, "affine", const Tensor& x, float alpha, float beta,
                       Tensor& out);
// out[j] = sum of x over the rows that broadcast onto j (out's shape broadcasts to x's).
BRAID_KERNEL_SIGNATURE(SumToKernel, "sum_to", const Tensor& x, Tensor& out);
// Returns sum(x) and sum(x^2): partial sums of short blocks in float, blocks added in double.
BRAID_KERNEL_SIGNATURE(SumKernel, "sum", const Tensor& x, double* sum, double* sum_squares);

// c = alpha * op(a) @ op(b) + beta * c, batched over leading dims (a's and b's batch dims
// equal c's or are absent). Each matrix may be row- or column-major (unit stride in either
// of its last two dims); c has unit stride in its last dim.
BRAID_KERNEL_SIGNATURE(GemmKernel, "gemm", const Tensor& a, bool trans_a, const Tensor& b,
                       bool trans_b, float alpha, float beta, Tensor& c);
// out = x W^T + bias, a linear layer's forward: x [M, K] and weight [N, K] each row- or
// column-major, bias [N] dense, out [M, N] with unit stride in its last dim. Optional: where a
// backend lacks it, linear fills out with the bias rows and adds a GemmKernel product (beta 1).
// The CPU kernel hands the bias to oneDNN's matmul primitive where it runs the product, which
// adds it while writing out instead of reading a prefilled out back.
BRAID_KERNEL_SIGNATURE(LinearBiasKernel, "linear_bias", const Tensor& x, const Tensor& weight,
                       const Tensor& bias, Tensor& out);
// Two independent GemmKernel products, as a linear layer's backward has (its input and weight
// gradients). Optional: where a backend lacks it, linear makes two GemmKernel calls. The CPU
// kernel on two threads runs each product whole on its own thread, both at once.
struct GemmProduct {
  const Tensor* a;
  bool trans_a;
  const Tensor* b;
  bool trans_b;
  float alpha;
  float beta;
  Tensor* c;
};
BRAID_KERNEL_SIGNATURE(GemmPairKernel, "gemm_pair", const GemmProduct& first,
                       const GemmProduct& second);

BRAID_KERNEL_SIGNATURE(GeluForwardKernel, "gelu_forward", const Tensor& x, Tensor& y);
BRAID_KERNEL_SIGNATURE(GeluBackwardKernel, "gelu_backward", const Tensor& x, const Tensor& dy,
                       Tensor& dx);

// Softmax over the last dim.
BRAID_KERNEL_SIGNATURE(SoftmaxForwardKernel, "softmax_forward", const Tensor& x, Tensor& y);
BRAID_KERNEL_SIGNATURE(SoftmaxBackwardKernel, "softmax_backward", const Tensor& y, const Tensor& dy,
                       Tensor& dx);

// Layer norm over the last dim C of x [N, C]; mean and rstd are [N].
BRAID_KERNEL_SIGNATURE(LayerNormForwardKernel, "layer_norm_forward", const Tensor& x,
                       const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd);
// dweight/dbias are overwritten (not accumulated).
BRAID_KERNEL_SIGNATURE(LayerNormBackwardKernel, "layer_norm_backward", const Tensor& x,
                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, Tensor& dx, Tensor& dweight, Tensor& dbias);

// Scaled dot-product attention over [B, H, T, D] views (unit stride in D, any other strides),
// optionally causal. lse [B, H, T] receives each query row's log-sum-exp of scaled scores.
BRAID_KERNEL_SIGNATURE(AttentionForwardKernel, "attention_forward", const Tensor& q,
                       const Tensor& k, const Tensor& v, bool causal, float scale, Tensor& out,
                       Tensor& lse);
// Recomputes the probabilities from q, k and lse; dq, dk, dv are overwritten.
BRAID_KERNEL_SIGNATURE(AttentionBackwardKernel, "attention_backward", const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                       const Tensor& dout, bool causal, float scale, Tensor& dq, Tensor& dk,
                       Tensor& dv);

// out[n, :] = weight[ids[n], :]; ids are i32, checked against weight's rows.
BRAID_KERNEL_SIGNATURE(EmbeddingForwardKernel, "embedding_forward", const Tensor& weight,
                       const Tensor& ids, Tensor& out);
// dweight[ids[n], :] += dout[n, :] (dweight holds zeros or a gradient to add to).
BRAID_KERNEL_SIGNATURE(EmbeddingBackwardKernel, "embedding_backward", const Tensor& ids,
                       const Tensor& dout, Tensor& dweight);

// Per row n of logits [N, Vpad]: loss[n] = lse(logits[n, :V]) - logits[n, target[n]], or 0 when
// target[n] == ignore_index. Columns >= num_classes are padding and take no part.
BRAID_KERNEL_SIGNATURE(CrossEntropyForwardKernel, "cross_entropy_forward", const Tensor& logits,
                       const Tensor& targets, int64_t num_classes, int64_t ignore_index,
                       Tensor& losses, Tensor& lse);
// dlogits[n, :] = scale * (softmax(logits[n, :V]) - onehot(target[n])), zero on padding and
// on ignored rows.
BRAID_KERNEL_SIGNATURE(CrossEntropyBackwardKernel, "cross_entropy_backward", const Tensor& logits,
                       const Tensor& targets, const Tensor& lse, int64_t num_classes,
                       int64_t ignore_index, float scale, Tensor& dlogits);

// Both of the above in one sweep, for a loss about to be backpropagated: each row is read from
// memory once and its exponentials are evaluated once. dlogits is the backward's result for
// `scale`. Optional: where a backend lacks it, the op runs the two kernels. The CPU kernel
// also accepts dlogits that are logits itself (each row is read before it is overwritten).
BRAID_KERNEL_SIGNATURE(CrossEntropyFusedKernel, "cross_entropy_fused", const Tensor& logits,
                       const Tensor& targets, int64_t num_classes, int64_t ignore_index,
                       float scale, Tensor& losses, Tensor& dlogits);

// Vocabulary-parallel cross-entropy over this rank's piece logits [N, Vs] of the vocabulary,
// whose first `valid` columns are real classes (the rest is padding). targets are local
// column indices, or kTargetElsewhere (another rank's piece holds the target) or
// kTargetIgnored (the row takes no part).
constexpr int32_t kTargetElsewhere = -1;
constexpr int32_t kTargetIgnored = -2;
// row_max[n] = max over the valid columns (-inf when valid == 0).
BRAID_KERNEL_SIGNATURE(VocabShardMaxKernel, "vocab_shard_max", const Tensor& logits, int64_t valid,
                       Tensor& row_max);
// sum_exp[n] = sum over the valid columns of exp(logits[n, j] - row_max[n]) with the global
// row_max; target_logit[n] = logits[n, targets[n]] when this piece holds the target, else 0.
BRAID_KERNEL_SIGNATURE(VocabShardSumExpKernel, "vocab_shard_sum_exp", const Tensor& logits,
                       const Tensor& targets, int64_t valid, const Tensor& row_max, Tensor& sum_exp,
                       Tensor& target_logit);
// dlogits[n, j] = scale * (exp(logits[n, j] - lse[n]) - [j == targets[n]]) on valid columns,
// 0 on padding columns and on ignored rows (lse: the global log-sum-exp).
BRAID_KERNEL_SIGNATURE(VocabShardBackwardKernel, "vocab_shard_backward", const Tensor& logits,
                       const Tensor& targets, int64_t valid, const Tensor& lse, float scale,
                       Tensor& dlogits);
// local[n] from global targets: targets[n] - begin where this piece holds it (in [0, valid)),
// kTargetIgnored where targets[n] == ignore_index (checked first), else kTargetElsewhere. The
// op checks the targets' range; the kernel maps whatever it is given.
BRAID_KERNEL_SIGNATURE(VocabShardTargetsKernel, "vocab_shard_targets", const Tensor& targets,
                       int64_t begin, int64_t valid, int64_t ignore_index, Tensor& local);
// From the all-reduced pieces: lse[n] = row_max[n] + log(sum_exp[n]) and losses[n] = lse[n] -
// target_logit[n], 0 on rows whose local target is kTargetIgnored.
BRAID_KERNEL_SIGNATURE(VocabShardLossKernel, "vocab_shard_loss", const Tensor& row_max,
                       const Tensor& sum_exp, const Tensor& target_logit,
                       const Tensor& local_targets, Tensor& lse, Tensor& losses);
// A vocabulary-parallel embedding's lookup in its piece of `rows` rows from `begin`: local[n] =
// ids[n] - begin and mask[n] = 1 where the piece holds ids[n], else local[n] = 0 (a row that
// exists) and mask[n] = 0. mask is f32.
BRAID_KERNEL_SIGNATURE(VocabShardIdsKernel, "vocab_shard_ids", const Tensor& ids, int64_t begin,
                       int64_t rows, Tensor& local, Tensor& mask);

// One AdamW update of a dense f32 parameter in place (decoupled weight decay).
struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based, after increment
};
BRAID_KERNEL_SIGNATURE(AdamWKernel, "adamw", Tensor& param, const Tensor& grad, Tensor& exp_avg,
                       Tensor& exp_avg_sq, const AdamWHyper& hyper, float grad_scale);
// AdamWKernel over many parameters of one device in one call, bitwise equal to it on each. A
// backend can then keep its threads busy across tensor boundaries: on the CPU one parallel
// region instead of one per tensor, each ending in a barrier that the faster thread waits at.
struct AdamWUpdate {
  Tensor* param;
  const Tensor* grad;
  Tensor* exp_avg;
  Tensor* exp_avg_sq;
  AdamWHyper hyper;
};
BRAID_KERNEL_SIGNATURE(AdamWGroupKernel, "adamw_group", std::span<const AdamWUpdate> updates,
                       float grad_scale);
// A device step's scalars, kept on the device and read back once per logged step. `record`
// (f32[kStepRecord]) describes one step, `state` (f32[kStepState]) the run so far; counts are
// exact up to 2^24.
inline constexpr int kRecordLoss = 0, kRecordNorm = 1, kRecordScale = 2, kRecordSkip = 3,
                     kStepRecord = 4;
inline constexpr int kStateSkipped = 0, kStateFirstNonFinite = 1, kStepState = 2;
// Global-norm clipping on the gradients' device: norm = sqrt of the sum over `grads` (dense
// f32, one device) of their squares, accumulated in double; clip (f32[2] there) = {norm,
// scale} with scale = min(1, max_norm / (norm + 1e-6)), 1 when max_norm <= 0 or the norm is not
// finite (optim::clip_for_norm's rule). Deterministic: the split depends only on the sizes.
BRAID_KERNEL_SIGNATURE(GradNormKernel, "grad_norm", std::span<const Tensor> grads, float max_norm,
                       Tensor& clip);
// The norm in parts, for gradients spread over ranks: squares (f32[1] on the gradients' device)
// = the sum over `grads` of their squares, accumulated in double as GradNormKernel does and
// rounded to f32 once (the communicators carry f32); ClipFromSquaresKernel turns squares (f32[n],
// each rank's sums all-reduced) into clip = {norm, scale} with norm = sqrt of their sum taken in
// order in double, scale by GradNormKernel's rule. Nothing is read back.
BRAID_KERNEL_SIGNATURE(GradSquaresKernel, "grad_squares", std::span<const Tensor> grads,
                       Tensor& squares);
BRAID_KERNEL_SIGNATURE(ClipFromSquaresKernel, "clip_from_squares", const Tensor& squares,
                       float max_norm, Tensor& clip);
// One step's verdict, on the device: record = {loss[0], clip[0], clip[1], skip} where skip is 1
// when the loss or the norm is not finite; a skipped step adds 1 to state[kStateSkipped] and,
// when state[kStateFirstNonFinite] is still 0, sets it to step + 1 (the 1-based step).
BRAID_KERNEL_SIGNATURE(StepVerdictKernel, "step_verdict", const Tensor& loss, const Tensor& clip,
                       int64_t step, Tensor& record, Tensor& state);
// AdamWGroupKernel with the gradient scale read from device memory (record[kRecordScale]); when
// record[kRecordSkip] is not 0 nothing changes (the step is skipped on the device). Each
// update's step is its hyper.step minus (state[kStateSkipped] - skip_base): the skips the host
// has not counted yet. bias (i64 [2 * S], the bits of doubles) holds 1 - beta1^s, 1 - beta2^s
// for s = 1..S, computed on the host as AdamW computes them, so the update is bitwise
// AdamWKernel's for that step. A CPU backend may ignore `bias` and compute them itself.
BRAID_KERNEL_SIGNATURE(AdamWGroupDeviceKernel, "adamw_group_device",
                       std::span<const AdamWUpdate> updates, const Tensor& record,
                       const Tensor& state, const Tensor& bias, int64_t skip_base);
// SGD with momentum (buf may be undefined when momentum == 0).
BRAID_KERNEL_SIGNATURE(SgdKernel, "sgd", Tensor& param, const Tensor& grad, Tensor& momentum_buf,
                       float lr, float momentum, float weight_decay, float grad_scale,
                       bool first_step);

#undef BRAID_KERNEL_SIGNATURE

}  // namespace braid::ops
