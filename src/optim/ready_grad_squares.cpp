// ReadyGradSquares: gradient sums of squares recorded by grad-ready hooks.
#include "braid/optim/ready_grad_squares.h"

#include <unordered_map>

#include "braid/ops/reduce.h"

namespace braid::optim {

struct ReadyGradSquares::State {
  bool recording = false;
  std::unordered_map<const TensorImpl*, size_t> index;
  std::vector<std::optional<double>> squares;
};

ReadyGradSquares::ReadyGradSquares(const std::vector<Tensor>& params)
    : state_(std::make_shared<State>()) {
  state_->squares.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    BRAID_CHECK(state_->index.emplace(p.impl(), i).second,
                "ReadyGradSquares: parameter '{}' is listed twice", p.name());
    // The hook only watches the state: once this object is gone, it finds none and returns.
    p.add_grad_ready_hook([weak = std::weak_ptr<State>(state_), i](Tensor& param) {
      const std::shared_ptr<State> state = weak.lock();
      if (!state || !state->recording) return;
      const Tensor g = param.grad();
      // A device gradient is not read back here (each read would wait for the device): the
      // device step clips with one pass there (optim::clip_on_device).
      if (g.defined() && g.device().is_cpu()) state->squares[i] = sum_of_squares(g);
    });
  }
}

ReadyGradSquares::~ReadyGradSquares() = default;

void ReadyGradSquares::begin_backward(bool final_gradients) {
  state_->recording = final_gradients;
  for (auto& s : state_->squares) s.reset();
}

std::optional<double> ReadyGradSquares::recorded(const Tensor& param) const {
  const auto it = state_->index.find(param.impl());
  if (it == state_->index.end()) return std::nullopt;
  return state_->squares[it->second];
}

double grad_sum_of_squares(const Tensor& param, const ReadyGradSquares* ready) {
  if (ready)
    if (const std::optional<double> s = ready->recorded(param)) return *s;
  return sum_of_squares(param.grad());
}

}  // namespace braid::optim
