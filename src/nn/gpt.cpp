// GPT-2 model: construction, name-keyed initialisation, forward, loss and sampling.
#include "braid/nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

#include "braid/autograd/engine.h"
#include "braid/autograd/grad_mode.h"
#include "braid/autograd/node.h"
#include "braid/core/generator.h"
#include "braid/core/trace.h"
#include "braid/nn/init.h"
#include "braid/ops.h"
#include "braid/ops/host_checked.h"

namespace braid::nn {
namespace {

// Identity in the forward pass. In the backward, the gradient reaching the marker after block
// `layer` opens that block's backward span and the one before it closes the span: the engine
// runs a block's nodes between the two (dependency counts: the input's gradient is final only
// once everything inside the block ran). Only added while a trace records.
Tensor backward_marker(const Tensor& x, int64_t layer, bool block_output,
                       const std::shared_ptr<trace::Clock::time_point>& began) {
  Tensor out = x.detach();
  autograd::record("trace_marker", {x}, {&out},
                   [layer, block_output, began](const std::vector<Tensor>& g) {
                     if (block_output) {
                       *began = trace::Clock::now();
                     } else {
                       trace::complete(fmt::format("backward block {}", layer), "backward", *began,
                                       trace::Clock::now(), {{"block", layer}});
                     }
                     return std::vector<Tensor>{g[0]};
                   });
  return out;
}

}  // namespace

int64_t GptConfig::padded_vocab(int tp) const {
  const int64_t m = std::lcm(std::max<int64_t>(padded_vocab_multiple, 1), std::max(tp, 1));
  return (vocab_size + m - 1) / m * m;
}

void GptConfig::validate() const {
  BRAID_CHECK(vocab_size > 0, "model.vocab_size must be > 0, got {}", vocab_size);
  BRAID_CHECK(n_layer > 0, "model.n_layer must be > 0, got {}", n_layer);
  BRAID_CHECK(n_head > 0, "model.n_head must be > 0, got {}", n_head);
  BRAID_CHECK(block_size > 0, "model.block_size must be > 0, got {}", block_size);
  BRAID_CHECK(n_embd > 0 && n_embd % n_head == 0,
              "model.n_embd {} is not divisible by model.n_head {}", n_embd, n_head);
}

std::string GptConfig::tensor_parallel_problem(int tp) const {
  if (tp < 1) return fmt::format("tensor parallelism tp={} must be >= 1", tp);
  const std::pair<const char*, int64_t> sizes[] = {{"model.n_head", n_head},
                                                   {"model.n_embd", n_embd},
                                                   {"the MLP width 4 * model.n_embd", 4 * n_embd}};
  for (const auto& [what, size] : sizes) {
    if (size % tp == 0) continue;
    // Valid tp values divide every split size; the head count and width share them.
    const int64_t g = std::gcd(n_head, n_embd);
    int64_t below = 1, above = 0;
    for (int64_t d = 1; d <= g; ++d) {
      if (g % d != 0) continue;
      if (d < tp) below = d;
      if (d > tp && above == 0) above = d;
    }
    return fmt::format("tensor parallelism tp={} does not divide {} = {}; nearest valid tp: {}", tp,
                       what, size,
                       above ? fmt::format("{} or {}", below, above) : std::to_string(below));
  }
  return "";
}

GptStagePart GptStagePart::whole(const GptConfig& config) {
  return {{{0, config.n_layer}}, true, true};
}

Gpt::Gpt(const GptConfig& config, TensorParallelPtr tp, std::optional<GptStagePart> part)
    : config_(config), tp_(std::move(tp)), part_(part ? *part : GptStagePart::whole(config)) {
  config_.validate();
  if (tp_) {
    const std::string problem = config_.tensor_parallel_problem(tp_->size());
    BRAID_CHECK(problem.empty(), "{}", problem);
  }
  BRAID_CHECK(!part_.chunks.empty(), "a GPT part needs at least one chunk of blocks");
  for (const auto& [first, end] : part_.chunks)
    BRAID_CHECK(0 <= first && first <= end && end <= config_.n_layer,
                "chunk of blocks [{}, {}) is outside the model's {} layers", first, end,
                config_.n_layer);
  // The tied head reads wte's rows, so a last stage keeps a copy of them.
  if (part_.embeddings || (part_.head && config_.tie_embeddings))
    wte = register_module(
        "wte", std::make_shared<VocabParallelEmbedding>(padded_vocab(), config_.n_embd, tp_));
  if (part_.embeddings)
    wpe = register_module("wpe", std::make_shared<Embedding>(config_.block_size, config_.n_embd));
  for (const auto& [first, end] : part_.chunks) {
    chunk_start_.push_back(blocks.size());
    for (int64_t i = first; i < end; ++i)
      blocks.push_back(
          register_module("blocks." + std::to_string(i),
                          std::make_shared<Block>(config_.n_embd, config_.n_head, tp_)));
  }
  chunk_start_.push_back(blocks.size());
  if (part_.head) {
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(config_.n_embd, 1e-5f, tp_));
    if (!config_.tie_embeddings)
      lm_head = register_module(
          "lm_head", std::make_shared<VocabParallelEmbedding>(padded_vocab(), config_.n_embd, tp_));
  }
}

void Gpt::init_weights(uint64_t seed) {
  autograd::NoGradGuard no_grad;
  const float kStd = 0.02f;
  const float residual_std = kStd / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  auto ends_with = [](const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const std::map<std::string, ShardSpec> shards = shard_specs();
  for (auto& [name, param] : named_parameters()) {
    Tensor p = param.detach();
    const ShardSpec& shard = shards.at(name);
    const auto dot = name.rfind('.', name.size() - std::string_view(".weight").size() - 1);
    const std::string owner = name.substr(dot == std::string::npos ? 0 : dot + 1);
    if (ends_with(name, ".bias")) {
      init::constant_(p, 0.0f);
    } else if (owner.rfind("ln", 0) == 0) {
      init::constant_(p, 1.0f);
    } else if (ends_with(name, "attn.proj.weight") || ends_with(name, "mlp.proj.weight")) {
      init::normal_(p, seed, name, residual_std, shard);
    } else {
      init::normal_(p, seed, name, kStd, shard);
    }
  }
  // Padding rows of the tied embedding stay zero: no token selects them, no logit uses them.
  // Each rank clears the padding rows inside its piece of the vocabulary.
  for (const auto& table : {wte, lm_head}) {
    if (!table) continue;
    const int64_t rows = table->weight.size(0);
    const int64_t first_padding =
        std::clamp<int64_t>(config_.vocab_size - table->vocab_begin(), 0, rows);
    if (first_padding < rows)
      table->weight.detach().narrow(0, first_padding, rows - first_padding).zero_();
  }
}

namespace {

// Position ids [first, first + n) on `device`. On a device made once per (device, first, n) and
// marked as checked on the host: a fresh host-to-device copy every step would wait for the
// device, and reading them back for the embedding's check would wait again.
Tensor position_ids(int64_t first, int64_t n, Device device) {
  std::vector<int32_t> positions(n);
  if (device.is_cpu()) {
    std::iota(positions.begin(), positions.end(), static_cast<int32_t>(first));
    return Tensor::from_vector(positions, {n}, device);
  }
  using Key = std::tuple<int, int, int64_t, int64_t>;
  static std::mutex mutex;
  static auto* cache = new std::map<Key, Tensor>();  // never freed: a few tiny tensors
  std::lock_guard<std::mutex> lock(mutex);
  const Key key{static_cast<int>(device.kind), device.index, first, n};
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(first));
  Tensor t = Tensor::from_vector(positions, {n}, device);
  ops::mark_host_checked(t, {static_cast<int32_t>(first), static_cast<int32_t>(first + n - 1), 0});
  return cache->emplace(key, t).first->second;
}

}  // namespace

void Gpt::check_ids(const Tensor& ids) const {
  BRAID_CHECK(ids.dim() == 2 && ids.dtype() == DType::i32,
              "GPT input ids must be i32 [B, T], got {}", ids.str());
  const int64_t t = ids.size(1);
  BRAID_CHECK(t <= config_.block_size,
              "sequence of {} tokens is longer than the model's {} positions (model.block_size)", t,
              config_.block_size);
  // The embedding accepts padding rows; a token id there would be a silent data bug. Checked
  // on the host: device ids come over once, unless the host checked them before copying them.
  ops::check_ids_in_range(ids, config_.vocab_size, "vocabulary");
  if (tp_ && tp_->sequence_parallel())
    BRAID_CHECK(t % tp_->size() == 0,
                "sequence of {} tokens does not split over tp={} under sequence parallelism; "
                "use a sequence length that is a multiple of {}",
                t, tp_->size(), tp_->size());
}

Tensor Gpt::embed(const Tensor& ids) const {
  BRAID_CHECK(part_.embeddings, "this GPT part does not hold the embeddings (first stage)");
  const trace::PhaseScope phase(trace::Phase::forward);
  trace::Span span("forward", "embedding");
  check_ids(ids);
  // Under sequence parallelism the residual stream holds this rank's piece of the sequence,
  // so it adds the positions of that piece.
  const bool sequence_parallel = tp_ && tp_->sequence_parallel();
  const int64_t t = ids.size(1);
  const int64_t piece = sequence_parallel ? t / tp_->size() : t;
  const int64_t first = sequence_parallel ? piece * tp_->rank() : 0;
  return add(wte->forward(ids), embedding(replicated_parameter(tp_.get(), wpe->weight),
                                          position_ids(first, piece, wpe->weight.device())));
}

Tensor Gpt::forward_chunk(int chunk, const Tensor& x) const {
  BRAID_CHECK(chunk >= 0 && chunk + 1 < static_cast<int>(chunk_start_.size()),
              "chunk {} is not one of this GPT part's {} chunks", chunk, chunk_start_.size() - 1);
  const trace::PhaseScope phase(trace::Phase::forward);
  Tensor h = x;
  for (size_t i = chunk_start_[chunk]; i < chunk_start_[chunk + 1]; ++i) {
    const auto& block = blocks[i];
    const int64_t layer = part_.chunks[chunk].first + static_cast<int64_t>(i - chunk_start_[chunk]);
    trace::Span span("forward");
    std::shared_ptr<trace::Clock::time_point> backward_began;
    if (span.active()) {
      span.name(fmt::format("forward block {}", layer)).arg({"block", layer});
      if (autograd::needs_grad({&h})) {
        backward_began = std::make_shared<trace::Clock::time_point>();
        h = backward_marker(h, layer, false, backward_began);
      }
    }
    if (config_.recompute) {
      h = autograd::recompute(
          [block](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{block->forward(in[0])};
          },
          {h})[0];
    } else {
      h = block->forward(h);
    }
    if (backward_began) h = backward_marker(h, layer, true, backward_began);
  }
  return h;
}

Tensor Gpt::head_logits(const Tensor& x) const {
  BRAID_CHECK(part_.head, "this GPT part does not hold the head (last stage)");
  const trace::PhaseScope phase(trace::Phase::forward);
  trace::Span span("forward", "head");
  // The head is column-parallel over the vocabulary: every rank needs the whole sequence.
  return linear(enter_tensor_parallel(tp_.get(), ln_f->forward(x), 1),
                lm_head ? lm_head->weight : wte->weight);
}

Tensor Gpt::head_loss(const Tensor& x, const Tensor& targets) const {
  const trace::PhaseScope phase(trace::Phase::forward);
  Tensor logits = head_logits(x);
  if (!tp_) return cross_entropy(std::move(logits), targets, config_.vocab_size);
  return tp_->vocab_parallel_cross_entropy(logits, targets, vocab_begin(), config_.vocab_size);
}

bool Gpt::holds_whole_model() const {
  return part_.embeddings && part_.head && part_.chunks.size() == 1 && part_.chunks[0].first == 0 &&
         part_.chunks[0].second == config_.n_layer;
}

Tensor Gpt::forward(const Tensor& ids) const {
  BRAID_CHECK(holds_whole_model(),
              "forward needs the whole model; this is one pipeline stage's part (run it through "
              "the pipeline)");
  return head_logits(forward_chunk(0, embed(ids)));
}

Tensor Gpt::loss(const Tensor& ids, const Tensor& targets) const {
  const trace::PhaseScope phase(trace::Phase::forward);
  Tensor logits = forward(ids);
  if (!tp_) return cross_entropy(std::move(logits), targets, config_.vocab_size);
  return tp_->vocab_parallel_cross_entropy(logits, targets, vocab_begin(), config_.vocab_size);
}

Tensor Gpt::window_ids(std::vector<int32_t> window) const {
  // Sequence parallelism needs a length that divides by tp: pad after the last token, which
  // causal attention keeps from influencing it.
  if (tp_ && tp_->sequence_parallel())
    window.resize((window.size() + tp_->size() - 1) / tp_->size() * tp_->size(), 0);
  // On the embedding's device (a pipeline stage without the embeddings only reads the shape).
  return Tensor::from_vector(window, {1, static_cast<int64_t>(window.size())},
                             wte ? wte->weight.device() : Device::cpu());
}

int64_t Gpt::generation_window() const {
  // The longest window that still fits the positions once padded for sequence parallelism.
  const int64_t tp = tp_ && tp_->sequence_parallel() ? tp_->size() : 1;
  const int64_t longest = config_.block_size / tp * tp;
  BRAID_CHECK(longest > 0, "model.block_size {} is shorter than tp={}", config_.block_size, tp);
  return longest;
}

std::vector<float> Gpt::logits_at(const Tensor& x, int64_t position) const {
  Tensor logits = head_logits(x).narrow(1, position, 1);
  if (tp_) logits = tp_->gather_from_region(logits, 2);
  std::vector<float> out = logits.to_vector();
  out.resize(config_.vocab_size);
  return out;
}

std::vector<int32_t> Gpt::generate(std::vector<int32_t> prompt,
                                   const SampleOptions& options) const {
  BRAID_CHECK(holds_whole_model(),
              "generate needs the whole model; a pipeline stage samples through the pipeline");
  autograd::NoGradGuard no_grad;
  return sample_tokens(std::move(prompt), options, config_.vocab_size, generation_window(),
                       [this](const std::vector<int32_t>& window) {
                         const Tensor x = forward_chunk(0, embed(window_ids(window)));
                         return logits_at(x, static_cast<int64_t>(window.size()) - 1);
                       });
}

std::vector<int32_t> sample_tokens(std::vector<int32_t> tokens, const SampleOptions& options,
                                   int64_t vocab_size, int64_t max_context,
                                   const WindowLogits& logits) {
  BRAID_CHECK(!tokens.empty(), "generate needs a non-empty prompt");
  BRAID_CHECK(options.temperature > 0, "sampling temperature must be > 0, got {}",
              options.temperature);
  const int64_t v = vocab_size;
  const uint64_t stream = stable_hash("generate");
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int64_t ctx = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_context);
    const std::vector<float> last = logits({tokens.end() - ctx, tokens.end()});
    std::vector<std::pair<float, int32_t>> scored(v);
    for (int64_t i = 0; i < v; ++i)
      scored[i] = {last[i] / options.temperature, static_cast<int32_t>(i)};
    int64_t keep = options.top_k > 0 ? std::min(options.top_k, v) : v;
    std::partial_sort(scored.begin(), scored.begin() + keep, scored.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    const float mx = scored[0].first;
    double total = 0;
    for (int64_t i = 0; i < keep; ++i) total += std::exp(static_cast<double>(scored[i].first - mx));
    double u = uniform_at(options.seed, stream, static_cast<uint64_t>(step)) * total;
    int32_t choice = scored[keep - 1].second;
    for (int64_t i = 0; i < keep; ++i) {
      u -= std::exp(static_cast<double>(scored[i].first - mx));
      if (u <= 0) {
        choice = scored[i].second;
        break;
      }
    }
    tokens.push_back(choice);
  }
  return tokens;
}

double training_flops_per_token(const GptConfig& c, int64_t num_parameters, int64_t seq_len) {
  return 6.0 * static_cast<double>(num_parameters) + 6.0 * static_cast<double>(c.n_layer) *
                                                         static_cast<double>(seq_len) *
                                                         static_cast<double>(c.n_embd);
}

}  // namespace braid::nn
