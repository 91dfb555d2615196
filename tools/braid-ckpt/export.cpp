// braid-ckpt export: assembles the model's whole tensors and writes them as a safetensors file
// under the names and layouts of Hugging Face's GPT2LMHeadModel (without "transformer.").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "braid/ckpt/gpt2_names.h"
#include "braid/core/error.h"
#include "braid/core/safetensors.h"
#include "braid/train/config.h"
#include "ckpt/format.h"
#include "commands.h"

namespace braid::ckpt_tool {
namespace {

constexpr const char* kUsage = "braid-ckpt export PATH OUT.safetensors [--vocab-size N]";

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
  ckpt::Gpt2Name target;
  std::string braid_name;
  Shape stored_shape;
  Tensor values;
};

// The GPT-2 tensor for one stored model tensor: assembled, padding rows cut, transposed.
Exported export_tensor(const Checkpoint& c, const TensorSlices& t, int64_t vocab) {
  const std::string name = t.name.substr(6);  // without "model/"
  const std::optional<ckpt::Gpt2Name> target = ckpt::gpt2_name(name);
  BRAID_CHECK(target.has_value(),
              "parameter '{}' has no GPT-2 counterpart (braid-ckpt exports GPT-2 models only)",
              name);
  const Tensor whole = assemble_tensor(c.folder, t);
  return {*target, name, whole.shape(), ckpt::to_gpt2(*target, whole, vocab)};
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
  for (const std::string& name : ckpt::gpt2_names(layers, /*tied_head=*/true))
    if (!names.count(name)) missing.push_back(name);
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
