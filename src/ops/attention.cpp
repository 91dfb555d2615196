// attention ops: layout checks, dispatch to the online-softmax kernels, and gradients.
#include "braid/ops/attention.h"

#include <cmath>

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"

namespace braid {
namespace {

void check_heads(const Tensor& t, const char* role, const Shape& expect) {
  BRAID_CHECK(t.dtype() == DType::f32 && t.dim() == 4,
              "attention {} must be f32 [B, H, T, D], got {}", role, t.str());
  BRAID_CHECK(t.shape() == expect, "attention {} is {} but q is {}", role, t.str(),
              shape_str(expect));
}

// Gives a [B, H, T, D] view unit stride in D (copying only when it has none).
Tensor unit_inner(const Tensor& t) {
  return t.stride(-1) == 1 ? t : t.detach().contiguous();
}

// [B, H, T, D] view of a fresh [B, T, H, D] buffer: heads-merge afterwards is a free view.
Tensor heads_buffer(const ops::OpDevice& on, int64_t b, int64_t h, int64_t t, int64_t d) {
  Tensor buf = on.empty({b, t, h, d});
  return buf.alias({b, h, t, d}, {t * h * d, d, h * d, 1}, 0);
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  check_heads(q, "query", q.shape());
  check_heads(k, "key", q.shape());
  check_heads(v, "value", q.shape());
  const ops::OpDevice on("attention", {{"q", q}, {"k", k}, {"v", v}});
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  Tensor qd = unit_inner(q.detach()), kd = unit_inner(k.detach()), vd = unit_inner(v.detach());
  Tensor out = heads_buffer(on, B, H, T, D);
  Tensor lse = on.empty({B, H, T});
  ops::kernel<ops::AttentionForwardKernel>(on.device())(qd, kd, vd, causal, scale, out, lse);
  if (autograd::needs_grad({&q, &k, &v})) {
    Tensor saved_out = out.detach();
    autograd::record("Attention", {q, k, v}, {&out},
                     [qd, kd, vd, saved_out, lse, on, causal, scale](const std::vector<Tensor>& g) {
                       const Shape& s = qd.shape();
                       Tensor dq = on.empty(s), dk = on.empty(s), dv = on.empty(s);
                       ops::kernel<ops::AttentionBackwardKernel>(on.device())(
                           qd, kd, vd, saved_out, lse, unit_inner(g[0]), causal, scale, dq, dk, dv);
                       return std::vector<Tensor>{dq, dk, dv};
                     });
  }
  return out;
}

Tensor causal_self_attention(const Tensor& qkv, int64_t n_head) {
  BRAID_CHECK(qkv.dtype() == DType::f32 && qkv.dim() == 3 && qkv.size(2) % 3 == 0,
              "causal_self_attention needs f32 qkv [B, T, 3C], got {}", qkv.str());
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  BRAID_CHECK(n_head > 0 && C % n_head == 0, "width {} is not divisible by {} heads", C, n_head);
  const int64_t D = C / n_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const ops::OpDevice on("causal_self_attention", {{"qkv", qkv}});
  Tensor base = qkv.detach().contiguous();
  // q, k, v as [B, H, T, D] views into the fused buffer: no copies.
  auto head_view = [B, T, C, n_head, D](const Tensor& buf, int part) {
    return buf.alias({B, n_head, T, D}, {T * 3 * C, D, 3 * C, 1}, buf.offset() + part * C);
  };
  Tensor q = head_view(base, 0), k = head_view(base, 1), v = head_view(base, 2);
  Tensor heads = heads_buffer(on, B, n_head, T, D);
  Tensor lse = on.empty({B, n_head, T});
  ops::kernel<ops::AttentionForwardKernel>(on.device())(q, k, v, true, scale, heads, lse);
  Tensor out = heads.alias({B, T, C}, {T * C, C, 1}, 0);
  if (autograd::needs_grad({&qkv})) {
    Tensor saved_heads = heads;
    autograd::record("CausalSelfAttention", {qkv}, {&out},
                     [base, q, k, v, saved_heads, lse, head_view, on, B, T, C, n_head, D,
                      scale](const std::vector<Tensor>& g) {
                       Tensor dout = g[0].contiguous();
                       dout = dout.alias({B, n_head, T, D}, {T * C, D, C, 1}, dout.offset());
                       Tensor dqkv = on.empty({B, T, 3 * C});
                       Tensor dq = head_view(dqkv, 0), dk = head_view(dqkv, 1),
                              dv = head_view(dqkv, 2);
                       ops::kernel<ops::AttentionBackwardKernel>(on.device())(
                           q, k, v, saved_heads, lse, dout, true, scale, dq, dk, dv);
                       return std::vector<Tensor>{dqkv};
                     });
  }
  return out;
}

}  // namespace braid
