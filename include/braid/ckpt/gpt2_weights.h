// GPT-2 weights from a safetensors file with Hugging Face names (GPT2LMHeadModel, with or
// without "transformer."): the model shape they imply, their check against a braid model,
// and loading them into a model's parameters in any parallel layout.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "braid/core/safetensors.h"
#include "braid/nn/gpt.h"

namespace braid::ckpt {

// The model shape the tensors of `file` give: n_embd and vocab_size from wte.weight,
// block_size from wpe.weight, n_layer from the blocks h.<i>, and a tied head unless
// lm_head.weight is stored and differs from wte.weight. n_head cannot be read off the weights:
// it is `n_head`; padded_vocab_multiple is `padded_vocab_multiple`. Throws when wte.weight or
// wpe.weight is missing or not a matrix.
nn::GptConfig infer_gpt2_config(const SafetensorsFile& file, int64_t n_head,
                                int64_t padded_vocab_multiple = 64);

// A GPT-2 safetensors file checked against a braid model shape.
class Gpt2Weights {
 public:
  // Opens `path` and checks its tensors against a whole model of `config`: missing, extra
  // (anything but GPT-2's attention-mask buffers) and mis-shaped tensors, a name stored both
  // with and without "transformer.", a dtype that is not floating point, and for a tied head a
  // stored lm_head.weight that differs from wte.weight. Every problem goes into one error,
  // each on its own line naming the tensor, its shape and the expected shape.
  Gpt2Weights(const std::string& path, const nn::GptConfig& config);

  // braid's whole parameter `braid_name` of shape `shape` (the global shape of its ShardSpec:
  // the vocabulary rows padded with zeros to braid's padded vocabulary), f32 on the host.
  Tensor whole(const std::string& braid_name, const Shape& shape) const;

 private:
  SafetensorsFile file_;
  std::map<std::string, std::string> stored_;  // GPT-2 name -> its name in the file
};

// Sets every parameter of `model` from the GPT-2 weights in `path`: each rank's part and
// shards take their slices of the whole tensors (ShardSpec), so any tp / pp / dp layout gets
// the single-process model's values. The parameters must be on the host (load before
// Module::to). The file is checked against the whole model (Gpt2Weights), on every rank.
void load_gpt2_weights(const std::string& path, nn::Gpt& model);

}  // namespace braid::ckpt
