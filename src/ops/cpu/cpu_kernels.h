// Declarations of the CPU kernels (one .cpp per op family in this folder).
#pragma once

#include "braid/ops/kernel_signatures.h"

namespace braid::ops::cpu {

// Tensor::copy_ and fill_ call these two directly for host tensors (no table lookup).
void copy(const Tensor& src, Tensor& dst);
void fill(float value, Tensor& out);

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
void affine(const Tensor& x, float alpha, float beta, Tensor& out);
void sum_to(const Tensor& x, Tensor& out);
void sum(const Tensor& x, double* sum, double* sum_squares);

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha, float beta,
          Tensor& c);
void linear_bias(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& out);
void gemm_pair(const GemmProduct& first, const GemmProduct& second);

void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);
void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd);
void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dweight,
                         Tensor& dbias);

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale,
                       Tensor& out, Tensor& lse);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv);

void embedding_forward(const Tensor& weight, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight);

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                           int64_t ignore_index, Tensor& losses, Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            int64_t num_classes, int64_t ignore_index, float scale,
                            Tensor& dlogits);
void cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t num_classes,
                         int64_t ignore_index, float scale, Tensor& losses, Tensor& dlogits);
void vocab_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max);
void vocab_shard_sum_exp(const Tensor& logits, const Tensor& targets, int64_t valid,
                         const Tensor& row_max, Tensor& sum_exp, Tensor& target_logit);
void vocab_shard_backward(const Tensor& logits, const Tensor& targets, int64_t valid,
                          const Tensor& lse, float scale, Tensor& dlogits);
void vocab_shard_targets(const Tensor& targets, int64_t begin, int64_t valid, int64_t ignore_index,
                         Tensor& local);
void vocab_shard_loss(const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                      const Tensor& local_targets, Tensor& lse, Tensor& losses);
void vocab_shard_ids(const Tensor& ids, int64_t begin, int64_t rows, Tensor& local, Tensor& mask);

void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
           const AdamWHyper& hyper, float grad_scale);
void adamw_group(std::span<const AdamWUpdate> updates, float grad_scale);
void grad_norm(std::span<const Tensor> grads, float max_norm, Tensor& clip);
void grad_squares(std::span<const Tensor> grads, Tensor& squares);
void clip_from_squares(const Tensor& squares, float max_norm, Tensor& clip);
void step_verdict(const Tensor& loss, const Tensor& clip, int64_t step, Tensor& record,
                  Tensor& state);
void adamw_group_device(std::span<const AdamWUpdate> updates, const Tensor& record,
                        const Tensor& state, const Tensor& bias, int64_t skip_base);
void sgd(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
         float weight_decay, float grad_scale, bool first_step);

}  // namespace braid::ops::cpu
