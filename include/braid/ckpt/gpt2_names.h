// Hugging Face GPT-2 names, shapes and orientation of braid's GPT parameters: the one mapping
// that braid-ckpt export and import and model.init_from share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/nn/gpt.h"

namespace braid::ckpt {

// Where one braid parameter lives in GPT-2 (GPT2LMHeadModel's names without "transformer.").
struct Gpt2Name {
  std::string name;         // "h.0.attn.c_attn.weight"
  bool transpose = false;   // GPT-2's Conv1D stores [in, out], braid's Linear [out, in]
  bool vocab_rows = false;  // an embedding table: GPT-2 holds the real vocabulary, braid pads it
  // GPT-2's order: wte, wpe, the blocks h.<i> (each in its own order), ln_f, lm_head.
  std::tuple<int, int64_t, int> order;
};
// The GPT-2 counterpart of braid parameter `braid_name`; nullopt when it has none.
std::optional<Gpt2Name> gpt2_name(const std::string& braid_name);

// The GPT-2 names of a model with `n_layer` blocks, in GPT-2's order; lm_head.weight only for
// an untied head.
std::vector<std::string> gpt2_names(int64_t n_layer, bool tied_head);

// One tensor GPT-2 stores for a braid model.
struct Gpt2Tensor {
  std::string braid_name;
  Gpt2Name gpt2;
  Shape shape;  // in GPT-2's orientation, with the real vocabulary's rows
};
// Every tensor GPT-2 stores for a braid model of `config`, in GPT-2's order.
std::vector<Gpt2Tensor> gpt2_tensors(const nn::GptConfig& config);

// The GPT-2 tensor of braid's whole parameter `whole`: rows beyond `vocab_size` (padding)
// dropped from an embedding table, a Conv1D weight transposed. Dense.
Tensor to_gpt2(const Gpt2Name& target, const Tensor& whole, int64_t vocab_size);
// braid's whole parameter of shape `shape` from GPT-2's `values`: transposed back, an
// embedding table padded with zero rows. Dense f32.
Tensor from_gpt2(const Gpt2Name& target, const Tensor& values, const Shape& shape);

// A Hugging Face tensor name without GPT2LMHeadModel's "transformer." prefix.
std::string without_transformer_prefix(const std::string& name);
// True for GPT-2's attention-mask buffers (h.<i>.attn.bias, h.<i>.attn.masked_bias), which
// some files store next to the parameters.
bool is_gpt2_buffer(const std::string& name);

}  // namespace braid::ckpt
