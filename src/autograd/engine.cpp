// The backward engine (dependency counting over the tape) and recompute-based checkpointing.
#include "braid/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/leaf_capture.h"
#include "braid/autograd/grad_mode.h"
#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"

namespace braid::autograd {

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor& incoming = grads.at(0);
  // Inside a recompute replay, a captured leaf's gradient goes back to the outer pass.
  for (GradCapture* c = current_grad_capture(); c; c = c->enclosing) {
    auto it = c->grads.find(leaf_.impl());
    if (it == c->grads.end()) continue;
    if (incoming.defined())
      it->second = it->second.defined() ? add(it->second, incoming) : incoming.clone();
    return {};
  }
  if (incoming.defined()) {
    Tensor current = leaf_.grad();
    BRAID_CHECK(!current.defined() || current.device() == incoming.device(),
                "the gradient of {} arrives on {} but its .grad is on {}; give .grad the "
                "tensor's device",
                leaf_.str(), incoming.device().str(), current.device().str());
    if (current.defined()) {
      add_(current, incoming);  // in place: .grad may be a view into a flat bucket
    } else {
      // Own a dense copy: the incoming tensor may be shared with another input's gradient.
      leaf_.set_grad(incoming.clone());
    }
  }
  auto& hooks = leaf_.impl()->meta().grad_ready_hooks;
  for (auto& hook : hooks) hook(leaf_);
  return {};
}

namespace {

struct BySequence {
  bool operator()(const Node* a, const Node* b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

// Adds g into slot. In place when the engine holds the only reference to slot's tensor and
// storage (a fresh gradient nobody else can see); otherwise into a fresh tensor, so a buffer
// another node returned or saved is never modified.
void accumulate_into(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  if (!slot.defined()) {
    slot = g;
  } else if (slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 &&
             slot.is_contiguous() && slot.shape() == g.shape()) {
    add_(slot, g);
  } else {
    slot = add(slot, g);
  }
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  BRAID_CHECK(roots.size() == grads.size(), "backward: {} roots but {} gradients", roots.size(),
              grads.size());
  NoGradGuard no_grad;

  // Seed the root nodes' input buffers.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  std::vector<Node*> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    BRAID_CHECK(root.requires_grad(),
                "backward on {} which does not require grad (no parameter reached it, or it was "
                "computed under no_grad)",
                root.str());
    Tensor g = grads[i];
    if (!g.defined()) {
      BRAID_CHECK(root.numel() == 1, "backward on non-scalar {} needs an explicit gradient",
                  root.str());
      g = Tensor::full(root.shape(), 1.0f, DType::f32, root.device());
    }
    BRAID_CHECK(g.shape() == root.shape(), "gradient {} does not match root {}", g.str(),
                root.str());
    BRAID_CHECK(g.device() == root.device(),
                "backward: the gradient is on {} but the root {} is on {}; move it with .to(...)",
                g.device().str(), root.str(), root.device().str());
    Edge edge = gradient_edge(root);
    auto& buf = buffers[edge.node.get()];
    buf.resize(edge.node->num_outputs());
    accumulate_into(buf[edge.input_nr], g);
    keep_alive[edge.node.get()] = edge.node;
    seeds.push_back(edge.node.get());
  }

  // Count, for each reachable node, how many edges point at it. Each node is walked once even
  // when several roots share it (outputs of one split), or its edges would be counted once per
  // root and their targets would never become ready.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen(seeds.begin(), seeds.end());
  std::vector<Node*> stack(seen.begin(), seen.end());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.node) continue;
      ++dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  std::priority_queue<Node*, std::vector<Node*>, BySequence> ready;
  std::unordered_set<Node*> started;  // a node seeded by two roots is still pushed once
  for (Node* s : seeds)
    if (dependencies[s] == 0 && started.insert(s).second) ready.push(s);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> inputs = std::move(buffers[node]);
    buffers.erase(node);
    inputs.resize(node->num_outputs());
    std::vector<Tensor> outputs = node->apply(std::move(inputs));
    node->release_saved();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.node) continue;
      Node* next = e.node.get();
      auto& buf = buffers[next];
      if (buf.empty()) buf.resize(next->num_outputs());
      if (i < outputs.size()) accumulate_into(buf[e.input_nr], outputs[i]);
      keep_alive[next] = e.node;
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

std::vector<Tensor> recompute(const RecomputeFn& fn, const std::vector<Tensor>& inputs) {
  // Forward without history, noting the parameters (leaves requiring grad) fn touches.
  LeafRecorder recorder;
  recorder.enclosing = current_leaf_recorder();
  for (const Tensor& t : inputs) recorder.seen.insert(t.impl());  // inputs have their own edges
  std::vector<Tensor> outputs;
  {
    current_leaf_recorder() = &recorder;
    NoGradGuard no_grad;
    try {
      outputs = fn(inputs);
    } catch (...) {
      current_leaf_recorder() = recorder.enclosing;
      throw;
    }
    current_leaf_recorder() = recorder.enclosing;
  }
  if (recorder.enclosing)
    for (const Tensor& p : recorder.leaves) recorder.enclosing->note(p);
  if (!GradMode::is_enabled()) return outputs;

  // Edges to the inputs and to every parameter used inside: the parameters' gradients come
  // out of this node, so the outer pass counts them like any other contribution.
  std::vector<Tensor> edges = inputs;
  const std::vector<Tensor> params = recorder.leaves;
  edges.insert(edges.end(), params.begin(), params.end());
  std::vector<Tensor*> out_ptrs;
  // Fresh handles: an output may be one of the inputs (a passthrough, or contiguous() of a
  // dense input), and recording history on it would turn that input into a non-leaf.
  for (Tensor& o : outputs) o = o.detach();
  for (Tensor& o : outputs) out_ptrs.push_back(&o);
  const std::vector<Tensor> saved = inputs;
  record("Recompute", edges, out_ptrs,
         [fn, saved, params](const std::vector<Tensor>& grad_outputs) {
           // Re-run the segment with history on detached inputs, then backprop through it with the
           // parameters' gradients captured rather than accumulated.
           std::vector<Tensor> replay_inputs;
           for (const Tensor& t : saved) {
             Tensor d = t.detach();
             if (t.requires_grad()) d.set_requires_grad(true);
             replay_inputs.push_back(d);
           }
           std::vector<Tensor> replay_outputs;
           {
             GradModeGuard enable(true);
             replay_outputs = fn(replay_inputs);
           }
           GradCapture capture;
           capture.enclosing = current_grad_capture();
           for (const Tensor& p : params) capture.grads.emplace(p.impl(), Tensor());
           std::vector<Tensor> roots, root_grads;
           for (size_t i = 0; i < replay_outputs.size(); ++i) {
             if (!replay_outputs[i].requires_grad() || !grad_outputs[i].defined()) continue;
             roots.push_back(replay_outputs[i]);
             root_grads.push_back(grad_outputs[i]);
           }
           current_grad_capture() = &capture;
           try {
             if (!roots.empty()) backward(roots, root_grads);
           } catch (...) {
             current_grad_capture() = capture.enclosing;
             throw;
           }
           current_grad_capture() = capture.enclosing;
           std::vector<Tensor> grads;
           for (const Tensor& r : replay_inputs)
             grads.push_back(r.requires_grad() ? r.grad() : Tensor());
           for (const Tensor& p : params) grads.push_back(capture.grads.at(p.impl()));
           return grads;
         });
  return outputs;
}

}  // namespace braid::autograd
