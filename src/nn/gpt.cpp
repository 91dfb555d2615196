// GPT-2 model: construction, name-keyed initialisation, forward, loss and sampling.
#include "braid/nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "braid/autograd/engine.h"
#include "braid/autograd/grad_mode.h"
#include "braid/core/generator.h"
#include "braid/nn/init.h"
#include "braid/ops.h"

namespace braid::nn {

int64_t GptConfig::padded_vocab() const {
  const int64_t m = std::max<int64_t>(padded_vocab_multiple, 1);
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

Gpt::Gpt(const GptConfig& config) : config_(config) {
  config_.validate();
  wte = register_module("wte", std::make_shared<Embedding>(config_.padded_vocab(), config_.n_embd));
  wpe = register_module("wpe", std::make_shared<Embedding>(config_.block_size, config_.n_embd));
  for (int64_t i = 0; i < config_.n_layer; ++i)
    blocks.push_back(register_module("blocks." + std::to_string(i),
                                     std::make_shared<Block>(config_.n_embd, config_.n_head)));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(config_.n_embd));
  if (!config_.tie_embeddings)
    lm_head = register_module("lm_head",
                              std::make_shared<Embedding>(config_.padded_vocab(), config_.n_embd));
}

void Gpt::init_weights(uint64_t seed) {
  autograd::NoGradGuard no_grad;
  const float kStd = 0.02f;
  const float residual_std = kStd / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  auto ends_with = [](const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (auto& [name, param] : named_parameters()) {
    Tensor p = param.detach();
    const auto dot = name.rfind('.', name.size() - std::string_view(".weight").size() - 1);
    const std::string owner = name.substr(dot == std::string::npos ? 0 : dot + 1);
    if (ends_with(name, ".bias")) {
      init::constant_(p, 0.0f);
    } else if (owner.rfind("ln", 0) == 0) {
      init::constant_(p, 1.0f);
    } else if (ends_with(name, "attn.proj.weight") || ends_with(name, "mlp.proj.weight")) {
      init::normal_(p, seed, name, residual_std);
    } else {
      init::normal_(p, seed, name, kStd);
    }
  }
  // Padding rows of the tied embedding stay zero: no token selects them, no logit uses them.
  const int64_t v = config_.vocab_size, vp = config_.padded_vocab();
  if (vp > v) wte->weight.detach().narrow(0, v, vp - v).zero_();
  if (lm_head && vp > v) lm_head->weight.detach().narrow(0, v, vp - v).zero_();
}

Tensor Gpt::forward(const Tensor& ids) const {
  BRAID_CHECK(ids.dim() == 2 && ids.dtype() == DType::i32,
              "GPT input ids must be i32 [B, T], got {}", ids.str());
  const int64_t t = ids.size(1);
  BRAID_CHECK(t <= config_.block_size,
              "sequence of {} tokens is longer than the model's {} positions (model.block_size)", t,
              config_.block_size);
  // The embedding accepts padding rows; a token id there would be a silent data bug.
  const Tensor dense_ids = ids.contiguous();
  const int32_t* id = dense_ids.data<int32_t>();
  for (int64_t i = 0; i < dense_ids.numel(); ++i)
    BRAID_CHECK(id[i] >= 0 && id[i] < config_.vocab_size,
                "token id {} at position {} is outside the vocabulary [0, {})", id[i], i,
                config_.vocab_size);
  std::vector<int32_t> positions(t);
  std::iota(positions.begin(), positions.end(), 0);
  Tensor x = add(wte->forward(ids), wpe->forward(Tensor::from_vector(positions, {t})));
  for (const auto& block : blocks) {
    if (config_.recompute) {
      x = autograd::recompute(
          [block](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{block->forward(in[0])};
          },
          {x})[0];
    } else {
      x = block->forward(x);
    }
  }
  return linear(ln_f->forward(x), lm_head ? lm_head->weight : wte->weight);
}

Tensor Gpt::loss(const Tensor& ids, const Tensor& targets) const {
  return cross_entropy(forward(ids), targets, config_.vocab_size);
}

std::vector<int32_t> Gpt::generate(std::vector<int32_t> tokens,
                                   const SampleOptions& options) const {
  BRAID_CHECK(!tokens.empty(), "generate needs a non-empty prompt");
  BRAID_CHECK(options.temperature > 0, "sampling temperature must be > 0, got {}",
              options.temperature);
  autograd::NoGradGuard no_grad;
  const int64_t v = config_.vocab_size;
  const uint64_t stream = stable_hash("generate");
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int64_t ctx = std::min<int64_t>(static_cast<int64_t>(tokens.size()), config_.block_size);
    std::vector<int32_t> window(tokens.end() - ctx, tokens.end());
    Tensor logits = forward(Tensor::from_vector(window, {1, ctx}));
    const float* last = logits.data<float>() + (ctx - 1) * logits.size(-1);
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
