// The differentiable region collectives of tensor parallelism: each forward collective is
// recorded with its adjoint as the backward.
#include "braid/autograd/node.h"
#include "braid/parallel/tensor_parallel.h"

namespace braid::parallel {
namespace {

using dist::ProcessGroup;

int64_t piece_length(const Tensor& x, int dim, const ProcessGroup& group, const char* op) {
  const int64_t n = x.size(dim);
  BRAID_CHECK(n % group.size() == 0,
              "{}: dim {} of {} has {} entries, which do not split into {} equal pieces over "
              "group '{}'; make it a multiple of {}",
              op, dim, x.str(), n, group.size(), group.name(), group.size());
  return n / group.size();
}

Tensor all_reduce_sum(const Tensor& x, ProcessGroup& group) {
  Tensor y = x.detach().clone();
  group.all_reduce(y, dist::ReduceOp::sum)->wait();
  return y;
}

// The order that moves dim 0 of a [p, d0, d1, ...] tensor to just before dim `dim` + 1.
std::vector<int> stack_dim_to(int dim, int rank) {
  std::vector<int> order;
  for (int d = 1; d <= dim; ++d) order.push_back(d);
  order.push_back(0);
  for (int d = dim + 1; d <= rank; ++d) order.push_back(d);
  return order;
}

Tensor all_gather_along(const Tensor& x, int dim, ProcessGroup& group) {
  const int p = group.size();
  Tensor in = x.detach().contiguous();
  Shape stacked = in.shape();
  stacked.insert(stacked.begin(), p);
  Tensor out = Tensor::empty(stacked, x.dtype(), x.device());
  group.all_gather(in, out)->wait();
  Shape merged = x.shape();
  merged[dim] *= p;
  if (dim == 0) return out.reshape(merged);
  return out.permute(stack_dim_to(dim, x.dim())).contiguous().reshape(merged);
}

Tensor reduce_scatter_along(const Tensor& x, int dim, ProcessGroup& group) {
  const int p = group.size();
  const int64_t piece = piece_length(x, dim, group, "reduce-scatter");
  // [pre..., p * piece, post...] -> [p, pre..., piece, post...], each rank's piece contiguous.
  Shape split = x.shape();
  split[dim] = piece;
  split.insert(split.begin() + dim, p);
  std::vector<int> order{dim};
  for (int d = 0; d <= x.dim(); ++d)
    if (d != dim) order.push_back(d);
  Tensor in = x.detach().contiguous().reshape(split).permute(order).contiguous();
  Shape out_shape = x.shape();
  out_shape[dim] = piece;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  group.reduce_scatter(in, out, dist::ReduceOp::sum)->wait();
  return out;
}

Tensor piece_along(const Tensor& x, int dim, const ProcessGroup& group) {
  const int64_t piece = piece_length(x, dim, group, "scatter");
  return x.detach().narrow(dim, piece * group.rank(), piece).clone();
}

using Collective = Tensor (*)(const Tensor&, int, ProcessGroup&);

// Records `forward`'s result with `backward` applied to the gradient; both along `dim`.
Tensor region_op(const char* name, const Tensor& x, int dim, const ProcessGroupPtr& group,
                 Collective forward, Collective backward) {
  Tensor out = forward(x, dim, *group);
  if (autograd::needs_grad({&x}))
    autograd::record(name, {x}, {&out}, [group, dim, backward](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{backward(g[0], dim, *group)};
    });
  return out;
}

Tensor identity(const Tensor& x, int, ProcessGroup&) {
  return x.detach();
}
Tensor sum_over(const Tensor& x, int, ProcessGroup& group) {
  return all_reduce_sum(x, group);
}
Tensor gather(const Tensor& x, int dim, ProcessGroup& group) {
  return all_gather_along(x, dim, group);
}
Tensor reduce_scatter(const Tensor& x, int dim, ProcessGroup& group) {
  return reduce_scatter_along(x, dim, group);
}
Tensor piece(const Tensor& x, int dim, ProcessGroup& group) {
  return piece_along(x, dim, group);
}

}  // namespace

Tensor copy_to_region(const Tensor& x, const ProcessGroupPtr& group) {
  return region_op("CopyToRegion", x, 0, group, identity, sum_over);
}

Tensor reduce_from_region(const Tensor& x, const ProcessGroupPtr& group) {
  return region_op("ReduceFromRegion", x, 0, group, sum_over, identity);
}

Tensor scatter_to_region(const Tensor& x, int dim, const ProcessGroupPtr& group) {
  return region_op("ScatterToRegion", x, x.normalize_dim(dim), group, piece, gather);
}

Tensor gather_from_region(const Tensor& x, int dim, const ProcessGroupPtr& group) {
  return region_op("GatherFromRegion", x, x.normalize_dim(dim), group, gather, piece);
}

Tensor gather_sequence(const Tensor& x, int dim, const ProcessGroupPtr& group) {
  return region_op("GatherSequence", x, x.normalize_dim(dim), group, gather, reduce_scatter);
}

Tensor reduce_scatter_sequence(const Tensor& x, int dim, const ProcessGroupPtr& group) {
  return region_op("ReduceScatterSequence", x, x.normalize_dim(dim), group, reduce_scatter, gather);
}

}  // namespace braid::parallel
