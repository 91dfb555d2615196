// braid-ckpt export: assembles the model's whole tensors and writes them as a safetensors file
// under the names and layouts of Hugging Face's GPT2LMHeadModel (without "transformer.").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>
#include <tuple>

#include "braid/core/error.h"
#include "braid/core/safetensors.h"
#include "braid/train/config.h"
#include "ckpt/format.h"
#include "commands.h"

namespace braid::ckpt_tool {
namespace {

constexpr const char* kUsage = "braid-ckpt export PATH OUT.safetensors [--vocab-size N]";

// Where a braid parameter goes in GPT-2. GPT-2's Conv1D stores [in, out], braid's Linear
// [out, in], hence the transposes; the embedding tables lose braid's padding rows.
struct Gpt2Target {
  std::string name;
  bool transpose = false;
  bool vocab_rows = false;
  std::tuple<int, int64_t, int> order;  // wte, wpe, h.{i} in GPT-2's order, ln_f, lm_head
};

struct BlockParam {
  const char* braid;
  const char* gpt2;
  bool transpose;
};
constexpr BlockParam kBlockParams[] = {
    {"ln1.weight", "ln_1.weight", false},
    {"ln1.bias", "ln_1.bias", false},
    {"attn.qkv.weight", "attn.c_attn.weight", true},
    {"attn.qkv.bias", "attn.c_attn.bias", false},
    {"attn.proj.weight", "attn.c_proj.weight", true},
    {"attn.proj.bias", "attn.c_proj.bias", false},
    {"ln2.weight", "ln_2.weight", false},
    {"ln2.bias", "ln_2.bias", false},
    {"mlp.fc.weight", "mlp.c_fc.weight", true},
    {"mlp.fc.bias", "mlp.c_fc.bias", false},
    {"mlp.proj.weight", "mlp.c_proj.weight", true},
    {"mlp.proj.bias", "mlp.c_proj.bias", false},
};

std::optional<Gpt2Target> block_target(const std::string& name) {
  // "blocks.<i>.<rest>"
  const size_t dot = name.find('.', 7);
  if (!name.starts_with("blocks.") || dot == std::string::npos) return std::nullopt;
  const std::string index = name.substr(7, dot - 7), rest = name.substr(dot + 1);
  if (index.empty() ||
      !std::all_of(index.begin(), index.end(), [](unsigned char ch) { return std::isdigit(ch); }))
    return std::nullopt;
  for (int k = 0; k < static_cast<int>(std::size(kBlockParams)); ++k)
    if (rest == kBlockParams[k].braid)
      return Gpt2Target{"h." + index + "." + kBlockParams[k].gpt2,
                        kBlockParams[k].transpose,
                        false,
                        {2, std::stoll(index), k}};
  return std::nullopt;
}

std::optional<Gpt2Target> gpt2_target(const std::string& name) {
  if (name == "wte.weight") return Gpt2Target{name, false, true, {0, 0, 0}};
  if (name == "wpe.weight") return Gpt2Target{name, false, false, {1, 0, 0}};
  if (name == "ln_f.weight") return Gpt2Target{name, false, false, {3, 0, 0}};
  if (name == "ln_f.bias") return Gpt2Target{name, false, false, {3, 0, 1}};
  if (name == "lm_head.weight") return Gpt2Target{name, false, true, {4, 0, 0}};
  return block_target(name);
}

// The real vocabulary size: --vocab-size, else model.vocab_size of the stored training config.
int64_t vocab_size(const Checkpoint& c, const Args& a) {
  if (a.has("--vocab-size")) {
    const std::string& text = a.flags.at("--vocab-size");
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    BRAID_CHECK(ec == std::errc() && end == text.data() + text.size() && v > 0,
                "--vocab-size needs a positive integer, got '{}'", text);
    return v;
  }
  const std::string source = (c.folder / ckpt::kManifestFile).string() + " (config)";
  const std::optional<train::TrainConfig> cfg = stored_config(c);
  BRAID_CHECK(cfg.has_value(),
              "{} records no training config, so the real vocabulary size is unknown; pass "
              "--vocab-size N",
              source);
  BRAID_CHECK(!cfg->defaulted.count("model.vocab_size"),
              "{} does not set model.vocab_size; pass --vocab-size N", source);
  return cfg->model().vocab_size();
}

struct Exported {
  Gpt2Target target;
  std::string braid_name;
  Shape stored_shape;
  Tensor values;
};

// The GPT-2 tensor for one stored model tensor: assembled, padding rows cut, transposed.
Exported export_tensor(const Checkpoint& c, const TensorSlices& t, int64_t vocab) {
  const std::string name = t.name.substr(6);  // without "model/"
  const std::optional<Gpt2Target> target = gpt2_target(name);
  BRAID_CHECK(target.has_value(),
              "parameter '{}' has no GPT-2 counterpart (braid-ckpt exports GPT-2 models only)",
              name);
  Tensor whole = assemble_tensor(c.folder, t);
  Exported e{*target, name, whole.shape(), whole};
  if (target->vocab_rows) {
    BRAID_CHECK(whole.dim() == 2 && whole.shape()[0] >= vocab,
                "'{}' is {} but the vocabulary has {} tokens", name, shape_str(whole.shape()),
                vocab);
    e.values = whole.narrow(0, 0, vocab).contiguous();
  }
  if (target->transpose) {
    BRAID_CHECK(whole.dim() == 2, "'{}' is {}, expected a matrix", name, shape_str(whole.shape()));
    e.values = whole.transpose(0, 1).contiguous();
  }
  return e;
}

// Every parameter of a GPT-2 with the blocks found: none may be missing from the export.
void check_complete(const std::vector<Exported>& out) {
  int64_t layers = 0;
  std::set<std::string> names;
  for (const Exported& e : out) {
    names.insert(e.target.name);
    if (std::get<0>(e.target.order) == 2)
      layers = std::max(layers, std::get<1>(e.target.order) + 1);
  }
  std::vector<std::string> missing;
  for (const char* name : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"})
    if (!names.count(name)) missing.push_back(name);
  for (int64_t i = 0; i < layers; ++i)
    for (const BlockParam& p : kBlockParams)
      if (!names.count(fmt::format("h.{}.{}", i, p.gpt2)))
        missing.push_back(fmt::format("h.{}.{}", i, p.gpt2));
  BRAID_CHECK(
      missing.empty(), "the checkpoint lacks {} GPT-2 tensor{}: {}{}", missing.size(),
      missing.size() == 1 ? "" : "s",
      fmt::join(missing.begin(), missing.begin() + std::min<size_t>(missing.size(), 8), ", "),
      missing.size() > 8 ? ", ..." : "");
}

}  // namespace

int run_export(const std::vector<std::string>& args) {
  const Args a = parse_args(args, {}, {"--vocab-size"}, 2, kUsage);
  const Checkpoint c = open_checkpoint(a.positional[0]);
  const int64_t vocab = vocab_size(c, a);
  std::vector<Exported> out;
  for (const TensorSlices& t : group_by_tensor(c.manifest))
    if (t.name.starts_with("model/")) out.push_back(export_tensor(c, t, vocab));
  check_complete(out);
  std::sort(out.begin(), out.end(),
            [](const Exported& x, const Exported& y) { return x.target.order < y.target.order; });

  std::vector<std::pair<std::string, Tensor>> tensors;
  int64_t bytes = 0;
  for (const Exported& e : out) {
    tensors.emplace_back(e.target.name, e.values);
    bytes += static_cast<int64_t>(e.values.nbytes());
    fmt::print("  {:<28} {:<14} <- model/{} {}{}{}\n", e.target.name, shape_str(e.values.shape()),
               e.braid_name, shape_str(e.stored_shape), e.target.transpose ? ", transposed" : "",
               e.target.vocab_rows && e.stored_shape[0] != vocab ? ", padding rows dropped" : "");
  }
  const std::string& output = a.positional[1];
  save_safetensors(output, tensors,
                   {{"format", "pt"},
                    {"braid.checkpoint", c.folder.string()},
                    {"braid.step", std::to_string(c.manifest.step())}});
  fmt::print("wrote {}: {} tensors, {} bytes ({}), GPT-2 names, vocabulary {}, from {}\n", output,
             tensors.size(), bytes, human_bytes(bytes), vocab, c.folder.string());
  return 0;
}

}  // namespace braid::ckpt_tool
