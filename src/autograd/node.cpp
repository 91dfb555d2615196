// Node bookkeeping, the closure-based node every op records, and leaf accumulators.
#include "braid/autograd/node.h"

#include <atomic>

#include "autograd/accumulate_grad.h"
#include "autograd/leaf_capture.h"
#include "braid/autograd/grad_mode.h"

namespace braid::autograd {
namespace {

std::atomic<uint64_t> g_next_sequence_nr{0};
thread_local bool t_grad_enabled = true;

// The node recorded by `record`: a closure that owns the op's saved tensors.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, uint32_t outputs, BackwardFn fn)
      : name_(std::move(name)), fn_(std::move(fn)) {
    num_outputs_ = outputs;
  }

  std::string name() const override { return name_; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    BRAID_CHECK(fn_, "backward through {} a second time: its saved tensors were freed", name_);
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    if (!any) return std::vector<Tensor>(next_edges.size());
    if (grads.size() > 1) {
      for (size_t i = 0; i < grads.size(); ++i)
        if (!grads[i].defined())
          grads[i] = Tensor::zeros(output_shapes_[i], output_dtypes_[i], output_devices_[i]);
    }
    std::vector<Tensor> result = fn_(grads);
    BRAID_CHECK(result.size() == next_edges.size(), "{} returned {} gradients for {} inputs", name_,
                result.size(), next_edges.size());
    return result;
  }

  void release_saved() override { fn_ = nullptr; }

  std::vector<Shape> output_shapes_;
  std::vector<DType> output_dtypes_;
  std::vector<Device> output_devices_;

 private:
  std::string name_;
  BackwardFn fn_;
};

}  // namespace

bool GradMode::is_enabled() {
  return t_grad_enabled;
}
void GradMode::set_enabled(bool enabled) {
  t_grad_enabled = enabled;
}

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1)) {}

LeafRecorder*& current_leaf_recorder() {
  thread_local LeafRecorder* recorder = nullptr;
  return recorder;
}

GradCapture*& current_grad_capture() {
  thread_local GradCapture* capture = nullptr;
  return capture;
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (LeafRecorder* r = current_leaf_recorder())
    for (const Tensor* t : inputs)
      if (t) r->note(*t);
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (LeafRecorder* r = current_leaf_recorder())
    for (const Tensor& t : inputs) r->note(t);
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  // A leaf: share one accumulator per tensor so all uses count toward one dependency.
  auto& meta = t.impl()->meta();
  std::shared_ptr<Node> acc = meta.accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.accumulator = acc;
  }
  return {acc, 0};
}

Tensor direct_grad(const Tensor& t, bool* overwrite) {
  if (overwrite != nullptr) *overwrite = false;
  if (!t.defined() || !t.requires_grad() || !t.is_leaf()) return {};
  // A replay hands a captured leaf's gradient back to the outer pass instead.
  for (GradCapture* c = current_grad_capture(); c; c = c->enclosing)
    if (c->grads.count(t.impl())) return {};
  AutogradMeta& meta = t.impl()->meta();
  const Tensor& g = meta.grad;
  if (!g.defined() || g.dtype() != DType::f32 || g.device() != t.device() ||
      g.shape() != t.shape() || !g.is_contiguous())
    return {};
  if (meta.grad_stale && overwrite != nullptr) {
    meta.grad_stale = false;  // the caller writes every element
    *overwrite = true;
    return g;
  }
  return t.grad();  // fills a stale gradient's zeros first
}

void zero_grad(const Tensor& leaf) {
  if (!leaf.defined() || leaf.impl()->autograd == nullptr) return;
  AutogradMeta& meta = *leaf.impl()->autograd;
  if (!meta.grad.defined()) return;
  // Deferred only where nobody could see the difference: no other handle to this .grad and
  // no other tensor on its storage.
  if (meta.grad.impl_ptr().use_count() == 1 && meta.grad.storage().use_count() == 1)
    meta.grad_stale = true;
  else
    meta.grad.zero_();
}

void record(std::string name, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs,
            BackwardFn backward) {
  auto node = std::make_shared<FunctionNode>(std::move(name), static_cast<uint32_t>(outputs.size()),
                                             std::move(backward));
  node->next_edges.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(gradient_edge(t));
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    node->output_shapes_.push_back(outputs[i]->shape());
    node->output_dtypes_.push_back(outputs[i]->dtype());
    node->output_devices_.push_back(outputs[i]->device());
    outputs[i]->set_history(node, i);
  }
}

}  // namespace braid::autograd
