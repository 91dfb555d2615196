// ReadyGradSquares: each parameter's gradient sum of squares, taken as the gradient becomes final.
//
// Clipping needs the global gradient norm before any update. A separate pass after the
// backward reads every gradient back from memory. The grad-ready hook sees each gradient the
// moment the backward has finished it, partly still in cache, where the same squares cost the
// backward less than that pass did. The clip then adds the recorded
// values in the same parameter order, and each was computed by the same kernel on the same
// bits, so the norm is bitwise the one a separate pass computes.
//
// A record is right only while nothing changes the gradient after its hook: that holds for a
// single process under tensor and pipeline parallelism (their reductions run inside the
// autograd graph, before the hook), not for gradients summed or averaged after the backward
// (shared pipeline copies, data parallelism), whose squares the caller must compute itself.
//
// Only host gradients are recorded: a device's would each be read back, waiting for the device
// (the device step clips in one pass there, optim::clip_on_device).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::optim {

class ReadyGradSquares {
 public:
  // Adds a grad-ready hook to each of `params` (hooks cannot be removed; once this object is
  // gone they do nothing).
  explicit ReadyGradSquares(const std::vector<Tensor>& params);
  ~ReadyGradSquares();
  ReadyGradSquares(const ReadyGradSquares&) = delete;
  ReadyGradSquares& operator=(const ReadyGradSquares&) = delete;

  // Call before every backward. Forgets what earlier backwards recorded; `final_gradients`
  // says whether this backward completes the step's gradients (the last micro-batch), the
  // only one whose hooks record.
  void begin_backward(bool final_gradients);
  // The sum of squares of `param`'s gradient recorded by the last final backward, or nothing
  // (no final backward since begin_backward, no gradient, or not one of the tracked params).
  std::optional<double> recorded(const Tensor& param) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The sum of squares of `param`'s gradient: `ready`'s record when it has one, else computed.
double grad_sum_of_squares(const Tensor& param, const ReadyGradSquares* ready);

}  // namespace braid::optim
