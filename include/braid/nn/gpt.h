// GPT-2: learned positions, pre-LN blocks, GELU MLP x4, tied LM head, padded vocabulary.
#pragma once

#include <memory>
#include <vector>

#include "braid/nn/transformer.h"

namespace braid::nn {

struct GptConfig {
  int64_t vocab_size = 50257;
  int64_t padded_vocab_multiple = 64;  // embedding rows rounded up; padding never in the loss
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t block_size = 1024;   // number of learned positions (longest context)
  bool recompute = false;      // activation checkpointing per block
  bool tie_embeddings = true;  // LM head shares wte's weight (GPT-2); false adds lm_head

  int64_t padded_vocab() const;
  // Throws a clear error for impossible shapes (heads not dividing width, sizes <= 0).
  void validate() const;
};

struct SampleOptions {
  int64_t max_new_tokens = 64;
  float temperature = 1.0f;
  int64_t top_k = 0;  // 0: the whole vocabulary
  uint64_t seed = 0;
};

class Gpt : public Module {
 public:
  explicit Gpt(const GptConfig& config);

  // GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 * n_layer)),
  // zero biases, unit LayerNorm weights, zero padding rows. Layout-independent (nn/init.h).
  void init_weights(uint64_t seed);

  // ids i32 [B, T] -> logits [B, T, padded_vocab].
  Tensor forward(const Tensor& ids) const;
  // Mean cross-entropy of the next-token targets (i32 [B, T]; -1 is ignored).
  Tensor loss(const Tensor& ids, const Tensor& targets) const;
  // Continues `prompt` by sampling; runs without recording history.
  std::vector<int32_t> generate(std::vector<int32_t> prompt, const SampleOptions& options) const;

  const GptConfig& config() const { return config_; }
  std::shared_ptr<Embedding> wte, wpe;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Embedding> lm_head;  // only when the head is not tied

 private:
  GptConfig config_;
};

// FLOPs per token of one training step by the DESIGN.md convention: 6N + 6 L T C.
double training_flops_per_token(const GptConfig& config, int64_t num_parameters, int64_t seq_len);

}  // namespace braid::nn
