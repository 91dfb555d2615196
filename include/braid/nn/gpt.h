// GPT-2: learned positions, pre-LN blocks, GELU MLP x4, tied LM head, padded vocabulary.
#pragma once

#include <memory>
#include <string>
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

  // The embedding rows: vocab_size rounded up to a multiple of padded_vocab_multiple and of
  // tp (each tensor-parallel rank holds an equal piece of the vocabulary).
  int64_t padded_vocab(int tp = 1) const;
  // Throws a clear error for impossible shapes (heads not dividing width, sizes <= 0).
  void validate() const;
  // Why `tp` ways of tensor parallelism cannot split this model (heads, width or MLP width
  // not divisible; the message names the numbers and the nearest valid tp), or "".
  std::string tensor_parallel_problem(int tp) const;
};

struct SampleOptions {
  int64_t max_new_tokens = 64;
  float temperature = 1.0f;
  int64_t top_k = 0;  // 0: the whole vocabulary
  uint64_t seed = 0;
};

// With a TensorParallel the model is Megatron's tensor-parallel GPT: vocabulary-parallel
// embedding and tied head, heads and MLP split over the group, a vocabulary-parallel loss,
// optionally sequence parallel. Parameter names are the single-process names; each rank
// holds its shard (shard_specs() says which), initialised to exactly that slice.
class Gpt : public Module {
 public:
  explicit Gpt(const GptConfig& config, TensorParallelPtr tp = nullptr);

  // GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 * n_layer)),
  // zero biases, unit LayerNorm weights, zero padding rows. Layout-independent (nn/init.h).
  void init_weights(uint64_t seed);

  // ids i32 [B, T] -> logits [B, T, padded_vocab / tp]: this rank's vocabulary columns,
  // from vocab_begin(). Under sequence parallelism T must divide by tp.
  Tensor forward(const Tensor& ids) const;
  // Mean cross-entropy of the next-token targets (i32 [B, T]; -1 is ignored).
  Tensor loss(const Tensor& ids, const Tensor& targets) const;
  // Continues `prompt` by sampling; runs without recording history.
  std::vector<int32_t> generate(std::vector<int32_t> prompt, const SampleOptions& options) const;

  const GptConfig& config() const { return config_; }
  const TensorParallelPtr& tensor_parallel() const { return tp_; }
  int64_t vocab_begin() const { return wte->vocab_begin(); }
  int64_t padded_vocab() const { return config_.padded_vocab(tp_ ? tp_->size() : 1); }

  std::shared_ptr<VocabParallelEmbedding> wte;
  std::shared_ptr<Embedding> wpe;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<VocabParallelEmbedding> lm_head;  // only when the head is not tied

 private:
  // Logits of the last position of `window` over the whole vocabulary (gathered under tp).
  std::vector<float> last_logits(std::vector<int32_t> window) const;
  GptConfig config_;
  TensorParallelPtr tp_;
};

// FLOPs per token of one training step by the DESIGN.md convention: 6N + 6 L T C.
double training_flops_per_token(const GptConfig& config, int64_t num_parameters, int64_t seq_len);

}  // namespace braid::nn
