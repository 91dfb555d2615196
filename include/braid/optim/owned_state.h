// The training state one rank holds and updates itself: pieces of parameters and optimizer
// state, as views of the live tensors. Checkpoints write them (replicated state once, from
// data-parallel rank 0) and load straight into them, and the overlapped window replays
// updates on copies of them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "braid/optim/optimizer.h"

namespace braid::optim {

// A flat range of one local parameter and of its optimizer state.
struct StateShard {
  std::string name;  // the parameter's name
  size_t param = 0;  // its index in the optimizer's params()
  int64_t begin = 0, length = 0;
  Tensor value;                                       // [length] view of the parameter
  std::vector<std::pair<std::string, Tensor>> state;  // [length] views, named as param_state
  Tensor grad;  // [length] view of what the next update consumes; undefined: not updated
  float weight_decay = 0.0f;
  int64_t steps = 0;  // updates applied so far (AdamW's bias-correction count)

  bool is_whole() const { return begin == 0 && length == value.numel() && length > 0; }
};

struct OwnedState {
  std::vector<StateShard> shards;
  int64_t steps_taken = 0;  // optimizer steps completed (the owner's count)
  // Every data-parallel rank holds the same shards (plain data parallelism); false when each
  // holds its own part (ZeRO-1).
  bool replicated = true;
};

// Every parameter of `optimizer` whole, with its own state and gradient: what a rank owns
// when the optimizer updates whole parameters itself. Allocates state not yet used.
OwnedState whole_parameters(Optimizer& optimizer);

}  // namespace braid::optim
