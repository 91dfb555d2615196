// matmul and linear: shape checks, GEMM dispatch and their gradients (also GEMMs).
#include "braid/ops/matmul.h"

#include "braid/autograd/node.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/ops/op_device.h"
#include "braid/ops/reduce.h"
#include "braid/ops/views.h"

namespace braid {
namespace {

// True when a 2-D matrix view can go to GEMM as is (unit stride in one of its two dims).
bool gemm_ready(const Tensor& t) {
  const int64_t s0 = t.stride(-2), s1 = t.stride(-1);
  return s1 == 1 || s0 == 1 || t.size(-1) == 1 || t.size(-2) == 1;
}

Tensor gemm_operand(const Tensor& t) {
  return gemm_ready(t) ? t : t.detach().contiguous();
}

// c = op(a) @ op(b) with c allocated here; a, b: [.., M, K]-shaped after op().
Tensor gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Shape out_shape) {
  Tensor c = Tensor::empty(out_shape, DType::f32, a.device());
  ops::kernel<ops::GemmKernel>(a.device())(gemm_operand(a), ta, gemm_operand(b), tb, 1.0f, 0.0f, c);
  return c;
}

// Where a GEMM puts the gradient of `leaf`: straight into its .grad (beta = 1 adds to it) or
// over a .grad that zero_grad left stale (beta = 0), when the engine allows; else into a new
// tensor that is returned for the engine to add.
struct GradTarget {
  Tensor c;
  float beta = 0.0f;
  bool returned = true;

  Tensor result() const { return returned ? c : Tensor(); }
};

GradTarget grad_target(const Tensor& leaf, Shape shape, const Device& device) {
  bool overwrite = false;
  Tensor target = autograd::direct_grad(leaf, &overwrite);
  if (target.defined()) return {target, overwrite ? 0.0f : 1.0f, false};
  return {Tensor::empty(std::move(shape), DType::f32, device), 0.0f, true};
}

// The gradient op(a) @ op(b) of `leaf` (grad_target says where it goes).
Tensor gemm_grad(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& leaf,
                 Shape out_shape) {
  GradTarget target = grad_target(leaf, std::move(out_shape), a.device());
  ops::kernel<ops::GemmKernel>(a.device())(gemm_operand(a), ta, gemm_operand(b), tb, 1.0f,
                                           target.beta, target.c);
  return target.result();
}

// A linear layer's input gradient dY W and weight gradient dY^T X through one GemmPairKernel
// call: {dX, the weight's gradient or an undefined tensor when it went into its .grad}.
std::pair<Tensor, Tensor> linear_grads_as_pair(ops::GemmPairKernel::Fn pair, const Tensor& g2,
                                               const Tensor& x2, const Tensor& weight,
                                               const Tensor& weight_leaf) {
  const int64_t in = weight.size(1), out_features = weight.size(0);
  Tensor dy = gemm_operand(g2), w = gemm_operand(weight), x = gemm_operand(x2);
  Tensor dx = Tensor::empty({g2.size(0), in}, DType::f32, g2.device());
  GradTarget dw = grad_target(weight_leaf, {out_features, in}, g2.device());
  pair({&dy, false, &w, false, 1.0f, 0.0f, &dx}, {&dy, true, &x, false, 1.0f, dw.beta, &dw.c});
  return {dx, dw.result()};
}

// Only a leaf's gradient can be added into its .grad; other inputs keep no handle.
Tensor leaf_or_none(const Tensor& t, bool needed) {
  return needed && t.is_leaf() ? t : Tensor();
}

void check_float_matrix(const Tensor& t, const char* role) {
  BRAID_CHECK(t.dtype() == DType::f32, "matmul {} must be f32, got {}", role, t.str());
  BRAID_CHECK(t.dim() >= 2, "matmul {} needs at least 2 dims, got {}", role, t.str());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_float_matrix(a, "left operand");
  check_float_matrix(b, "right operand");
  (void)ops::OpDevice("matmul", {{"a", a}, {"b", b}});  // gemm() allocates on a's device
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  BRAID_CHECK(b.size(-2) == k, "matmul {} @ {}: inner dimensions {} and {} differ", a.str(),
              b.str(), k, b.size(-2));
  const bool shared_b = b.dim() == 2;
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  if (!shared_b) {
    BRAID_CHECK(Shape(b.shape().begin(), b.shape().end() - 2) == batch,
                "matmul {} @ {}: batch dimensions differ", a.str(), b.str());
  }
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = gemm(a, false, b, false, out_shape);
  if (autograd::needs_grad({&a, &b})) {
    Tensor sa = a.detach(), sb = b.detach();
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record("Matmul", {a, b}, {&out},
                     [sa, sb, need_a, need_b, shared_b, k, n](const std::vector<Tensor>& g) {
                       Tensor ga, gb;
                       if (need_a) ga = gemm(g[0], false, sb, true, sa.shape());
                       if (need_b) {
                         if (shared_b) {
                           // Sum over the batch by folding it into the GEMM's reduction dimension.
                           Tensor a2 = reshape(sa, {-1, k}), g2 = reshape(g[0], {-1, n});
                           gb = gemm(a2, true, g2, false, sb.shape());
                         } else {
                           gb = gemm(sa, true, g[0], false, sb.shape());
                         }
                       }
                       return std::vector<Tensor>{ga, gb};
                     });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  BRAID_CHECK(x.dtype() == DType::f32 && weight.dtype() == DType::f32,
              "linear computes in f32; got input {} and weight {}", x.str(), weight.str());
  BRAID_CHECK(weight.dim() == 2, "linear weight must be [out, in], got {}", weight.str());
  const int64_t in = weight.size(1), out_features = weight.size(0);
  BRAID_CHECK(x.dim() >= 1 && x.size(-1) == in, "linear: input {} does not end in {} features",
              x.str(), in);
  if (bias.defined())
    BRAID_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "linear bias must be [{}], got {}",
                out_features, bias.str());
  const ops::OpDevice on("linear", {{"input", x}, {"weight", weight}, {"bias", bias}});
  Tensor x2 = reshape(x.detach(), {-1, in});
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = on.empty(out_shape);
  Tensor out2 = out.alias({x2.size(0), out_features}, {out_features, 1}, 0);
  const auto& registry = ops::KernelRegistry::instance();
  if (bias.defined() && registry.has(ops::LinearBiasKernel::kName, x.device().kind)) {
    registry.get<ops::LinearBiasKernel>(x.device().kind)(
        gemm_operand(x2), gemm_operand(weight.detach()), bias.detach().contiguous(), out2);
  } else {
    float beta = 0.0f;
    if (bias.defined()) {
      // Start C from the bias rows so GEMM adds into it (beta = 1): no separate bias pass.
      out2.copy_(bias.detach().alias(out2.shape(), {0, bias.stride(0)}, bias.offset()));
      beta = 1.0f;
    }
    ops::kernel<ops::GemmKernel>(x.device())(gemm_operand(x2), false, gemm_operand(weight.detach()),
                                             true, 1.0f, beta, out2);
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    Tensor saved_x = need_w ? x2 : Tensor(), saved_w = need_x ? weight.detach() : Tensor();
    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    autograd::record(
        "Linear", inputs, {&out},
        [saved_x, saved_w, need_x, need_w, need_b, in, out_features, in_shape = x.shape(),
         has_bias = bias.defined(), weight_leaf = leaf_or_none(weight, need_w),
         bias_leaf = leaf_or_none(bias, need_b)](const std::vector<Tensor>& g) {
          Tensor g2 = reshape(g[0], {-1, out_features});
          std::vector<Tensor> grads(has_bias ? 3 : 2);
          const auto& registry = ops::KernelRegistry::instance();
          if (need_x && need_w && registry.has(ops::GemmPairKernel::kName, g2.device().kind)) {
            auto [dx, dw] =
                linear_grads_as_pair(registry.get<ops::GemmPairKernel>(g2.device().kind), g2,
                                     saved_x, saved_w, weight_leaf);
            grads[0] = reshape(dx, in_shape);
            grads[1] = dw;
          } else {
            if (need_x)
              grads[0] = reshape(gemm(g2, false, saved_w, false, {g2.size(0), in}), in_shape);
            if (need_w)
              grads[1] = gemm_grad(g2, true, saved_x, false, weight_leaf, {out_features, in});
          }
          if (need_b) {
            Tensor target = autograd::direct_grad(bias_leaf);
            if (target.defined())  // the column sums are added into out
              ops::kernel<ops::SumToKernel>(g2.device())(g2.contiguous(), target);
            else
              grads[2] = sum_to_shape(g2.contiguous(), {out_features});
          }
          return grads;
        });
  }
  return out;
}

}  // namespace braid
