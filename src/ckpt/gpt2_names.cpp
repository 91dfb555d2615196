// The braid <-> Hugging Face GPT-2 mapping of parameter names, shapes and orientations.
#include "braid/ckpt/gpt2_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "braid/core/error.h"

namespace braid::ckpt {
namespace {

// A block parameter: its names, and its GPT-2 shape in multiples of the width C ({3, 0}: [3C],
// {1, 4}: [C, 4C]).
struct BlockParam {
  const char* braid;
  const char* gpt2;
  bool transpose;
  int64_t rows, cols;
};
constexpr BlockParam kBlockParams[] = {
    {"ln1.weight", "ln_1.weight", false, 1, 0},
    {"ln1.bias", "ln_1.bias", false, 1, 0},
    {"attn.qkv.weight", "attn.c_attn.weight", true, 1, 3},
    {"attn.qkv.bias", "attn.c_attn.bias", false, 3, 0},
    {"attn.proj.weight", "attn.c_proj.weight", true, 1, 1},
    {"attn.proj.bias", "attn.c_proj.bias", false, 1, 0},
    {"ln2.weight", "ln_2.weight", false, 1, 0},
    {"ln2.bias", "ln_2.bias", false, 1, 0},
    {"mlp.fc.weight", "mlp.c_fc.weight", true, 1, 4},
    {"mlp.fc.bias", "mlp.c_fc.bias", false, 4, 0},
    {"mlp.proj.weight", "mlp.c_proj.weight", true, 4, 1},
    {"mlp.proj.bias", "mlp.c_proj.bias", false, 1, 0},
};

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char ch) { return std::isdigit(ch); });
}

// "blocks.<i>.<rest>" -> "h.<i>.<gpt2 rest>".
std::optional<Gpt2Name> block_name(const std::string& name) {
  const size_t dot = name.find('.', 7);
  if (!name.starts_with("blocks.") || dot == std::string::npos) return std::nullopt;
  const std::string index = name.substr(7, dot - 7), rest = name.substr(dot + 1);
  if (!all_digits(index)) return std::nullopt;
  for (int k = 0; k < static_cast<int>(std::size(kBlockParams)); ++k)
    if (rest == kBlockParams[k].braid)
      return Gpt2Name{"h." + index + "." + kBlockParams[k].gpt2,
                      kBlockParams[k].transpose,
                      false,
                      {2, std::stoll(index), k}};
  return std::nullopt;
}

}  // namespace

std::optional<Gpt2Name> gpt2_name(const std::string& name) {
  if (name == "wte.weight") return Gpt2Name{name, false, true, {0, 0, 0}};
  if (name == "wpe.weight") return Gpt2Name{name, false, false, {1, 0, 0}};
  if (name == "ln_f.weight") return Gpt2Name{name, false, false, {3, 0, 0}};
  if (name == "ln_f.bias") return Gpt2Name{name, false, false, {3, 0, 1}};
  if (name == "lm_head.weight") return Gpt2Name{name, false, true, {4, 0, 0}};
  return block_name(name);
}

std::vector<std::string> gpt2_names(int64_t n_layer, bool tied_head) {
  std::vector<std::string> out = {"wte.weight", "wpe.weight"};
  for (int64_t i = 0; i < n_layer; ++i)
    for (const BlockParam& p : kBlockParams) out.push_back(fmt::format("h.{}.{}", i, p.gpt2));
  out.insert(out.end(), {"ln_f.weight", "ln_f.bias"});
  if (!tied_head) out.push_back("lm_head.weight");
  return out;
}

std::vector<Gpt2Tensor> gpt2_tensors(const nn::GptConfig& config) {
  const int64_t c = config.n_embd;
  std::vector<Gpt2Tensor> out = {{"wte.weight", *gpt2_name("wte.weight"), {config.vocab_size, c}},
                                 {"wpe.weight", *gpt2_name("wpe.weight"), {config.block_size, c}}};
  for (int64_t i = 0; i < config.n_layer; ++i)
    for (const BlockParam& p : kBlockParams) {
      const std::string braid = fmt::format("blocks.{}.{}", i, p.braid);
      out.push_back({braid, *gpt2_name(braid),
                     p.cols == 0 ? Shape{p.rows * c} : Shape{p.rows * c, p.cols * c}});
    }
  out.push_back({"ln_f.weight", *gpt2_name("ln_f.weight"), {c}});
  out.push_back({"ln_f.bias", *gpt2_name("ln_f.bias"), {c}});
  if (!config.tie_embeddings)
    out.push_back({"lm_head.weight", *gpt2_name("lm_head.weight"), {config.vocab_size, c}});
  return out;
}

Tensor to_gpt2(const Gpt2Name& target, const Tensor& whole, int64_t vocab_size) {
  Tensor out = whole;
  if (target.vocab_rows) {
    BRAID_CHECK(whole.dim() == 2 && whole.shape()[0] >= vocab_size,
                "'{}' is {} but the vocabulary has {} tokens", target.name,
                shape_str(whole.shape()), vocab_size);
    out = whole.narrow(0, 0, vocab_size);
  }
  if (target.transpose) {
    BRAID_CHECK(whole.dim() == 2, "'{}' is {}, expected a matrix", target.name,
                shape_str(whole.shape()));
    out = out.transpose(0, 1);
  }
  return out.contiguous();
}

Tensor from_gpt2(const Gpt2Name& target, const Tensor& values, const Shape& shape) {
  Tensor v = values.dtype() == DType::f32 ? values : values.to(DType::f32);
  if (target.transpose) v = v.transpose(0, 1);
  if (target.vocab_rows && v.dim() == 2 && shape.size() == 2 && v.shape()[0] < shape[0] &&
      v.shape()[1] == shape[1]) {
    Tensor padded = Tensor::zeros(shape);
    padded.narrow(0, 0, v.shape()[0]).copy_(v);
    return padded;
  }
  BRAID_CHECK(v.shape() == shape, "GPT-2 tensor '{}' ({}) does not give braid's shape {}",
              target.name, shape_str(values.shape()), shape_str(shape));
  return v.contiguous();
}

std::string without_transformer_prefix(const std::string& name) {
  constexpr std::string_view prefix = "transformer.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

bool is_gpt2_buffer(const std::string& name) {
  // "h.<i>.attn.bias" / "h.<i>.attn.masked_bias" ("h.<i>.attn.c_attn.bias" is a parameter).
  if (!name.starts_with("h.")) return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos || !all_digits(name.substr(2, dot - 2))) return false;
  const std::string rest = name.substr(dot + 1);
  return rest == "attn.bias" || rest == "attn.masked_bias";
}

}  // namespace braid::ckpt
