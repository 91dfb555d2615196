// GPT-2: learned positions, pre-LN blocks, GELU MLP x4, tied LM head, padded vocabulary.
#pragma once

#include <functional>
#include <memory>
#include <optional>
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

// The part of the GPT one pipeline stage holds: its model chunks (each a range of blocks),
// the embeddings when it runs the first virtual stage, and ln_f + head + loss when it runs the
// last. A tied head on a last stage without the embeddings keeps its own copy of wte.weight
// (same name, same initial values); the pipeline sums the two copies' gradients.
struct GptStagePart {
  std::vector<std::pair<int64_t, int64_t>> chunks;  // blocks [first, end) of each chunk
  bool embeddings = true;
  bool head = true;
  // Everything: one chunk of all blocks, embeddings and head.
  static GptStagePart whole(const GptConfig& config);
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
  explicit Gpt(const GptConfig& config, TensorParallelPtr tp = nullptr,
               std::optional<GptStagePart> part = std::nullopt);

  // GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 * n_layer)),
  // zero biases, unit LayerNorm weights, zero padding rows. Layout-independent (nn/init.h).
  void init_weights(uint64_t seed);

  // ids i32 [B, T] -> logits [B, T, padded_vocab / tp]: this rank's vocabulary columns,
  // from vocab_begin(). Under sequence parallelism T must divide by tp. Needs the whole
  // model (no pipeline split).
  Tensor forward(const Tensor& ids) const;
  // Mean cross-entropy of the next-token targets (i32 [B, T]; -1 is ignored).
  Tensor loss(const Tensor& ids, const Tensor& targets) const;

  // The pieces a pipeline stage runs (each needs its part): token + position embeddings,
  // -> [B, T (/ tp under sequence parallelism), C];
  Tensor embed(const Tensor& ids) const;
  // the blocks of chunk `chunk` of this part;
  Tensor forward_chunk(int chunk, const Tensor& x) const;
  // ln_f, the head and the mean cross-entropy.
  Tensor head_loss(const Tensor& x, const Tensor& targets) const;
  const GptStagePart& part() const { return part_; }
  bool holds_whole_model() const;
  // Continues `prompt` by sampling; runs without recording history. Needs the whole model;
  // a pipeline samples with sample_tokens and the pieces below.
  std::vector<int32_t> generate(std::vector<int32_t> prompt, const SampleOptions& options) const;
  // The ids of a window for one forward ([1, L]; padded after its end for sequence
  // parallelism), the longest window generation uses, and the logits over the whole
  // vocabulary at `position` of the last block's output x (gathered over tp).
  Tensor window_ids(std::vector<int32_t> window) const;
  int64_t generation_window() const;
  std::vector<float> logits_at(const Tensor& x, int64_t position) const;

  const GptConfig& config() const { return config_; }
  const TensorParallelPtr& tensor_parallel() const { return tp_; }
  // The first vocabulary row (and logit column) of this rank's piece.
  int64_t vocab_begin() const { return (wte ? wte : lm_head)->vocab_begin(); }
  int64_t padded_vocab() const { return config_.padded_vocab(tp_ ? tp_->size() : 1); }

  std::shared_ptr<VocabParallelEmbedding> wte;
  std::shared_ptr<Embedding> wpe;
  std::vector<std::shared_ptr<Block>> blocks;  // the blocks this part holds, in order
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<VocabParallelEmbedding> lm_head;  // only when the head is not tied

 private:
  Tensor head_logits(const Tensor& x) const;
  void check_ids(const Tensor& ids) const;
  GptConfig config_;
  TensorParallelPtr tp_;
  GptStagePart part_;
  std::vector<size_t> chunk_start_;  // index into blocks of each chunk's first block
};

// The logits over the vocabulary at the last position of a token window.
using WindowLogits = std::function<std::vector<float>(const std::vector<int32_t>& window)>;
// Continues `prompt` by sampling from `logits` a token at a time (temperature, top-k, seeded),
// each window holding at most `max_context` of the latest tokens.
std::vector<int32_t> sample_tokens(std::vector<int32_t> prompt, const SampleOptions& options,
                                   int64_t vocab_size, int64_t max_context,
                                   const WindowLogits& logits);

// FLOPs per token of one training step by the DESIGN.md convention: 6N + 6 L T C.
double training_flops_per_token(const GptConfig& config, int64_t num_parameters, int64_t seq_len);

}  // namespace braid::nn
