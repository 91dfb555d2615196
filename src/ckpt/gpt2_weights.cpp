// Reading GPT-2 weights (Hugging Face names, safetensors): shape inference, the check of a file
// against a model (every problem in one error), and the load of each rank's slices.
#include "braid/ckpt/gpt2_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "braid/autograd/grad_mode.h"
#include "braid/ckpt/gpt2_names.h"
#include "braid/core/error.h"

namespace braid::ckpt {
namespace {

// The file's name of each GPT-2 tensor (prefix removed, buffers skipped); a name stored twice
// keeps its first spelling and is reported in `twice`.
std::map<std::string, std::string> stored_names(const SafetensorsFile& file,
                                                std::vector<std::string>* twice = nullptr) {
  std::map<std::string, std::string> out;
  for (const std::string& name : file.names()) {
    const std::string gpt2 = without_transformer_prefix(name);
    if (is_gpt2_buffer(gpt2)) continue;
    const auto [it, inserted] = out.emplace(gpt2, name);
    if (!inserted && twice)
      twice->push_back(fmt::format("{} is stored twice, as {} and as {}", gpt2, it->second, name));
  }
  return out;
}

bool is_float(const std::string& file_dtype) {
  return file_dtype == "F32" || file_dtype == "F64" || file_dtype == "BF16" || file_dtype == "F16";
}

Tensor f32(const SafetensorsFile& file, const std::string& name) {
  Tensor t = file.get(name);
  return t.dtype() == DType::f32 ? t : t.to(DType::f32);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

std::string describe(const nn::GptConfig& c) {
  return fmt::format("n_layer {}, n_embd {}, vocab_size {}, block_size {}, {} head", c.n_layer,
                     c.n_embd, c.vocab_size, c.block_size, c.tie_embeddings ? "tied" : "untied");
}

}  // namespace

nn::GptConfig infer_gpt2_config(const SafetensorsFile& file, int64_t n_head,
                                int64_t padded_vocab_multiple) {
  const std::map<std::string, std::string> stored = stored_names(file);
  auto matrix = [&](const char* name, const char* what) {
    const auto it = stored.find(name);
    BRAID_CHECK(it != stored.end(), "{} has no {} ({}), so it is not a GPT-2 model file",
                file.path(), name, what);
    const Shape& shape = file.entry(it->second).shape;
    BRAID_CHECK(shape.size() == 2, "{}: {} is {}, expected a matrix [{}]", file.path(), it->second,
                shape_str(shape), what);
    return shape;
  };
  const Shape wte = matrix("wte.weight", "vocabulary, n_embd");
  const Shape wpe = matrix("wpe.weight", "block_size, n_embd");
  nn::GptConfig config;
  config.vocab_size = wte[0];
  config.n_embd = wte[1];
  config.block_size = wpe[0];
  config.n_head = n_head;
  config.padded_vocab_multiple = padded_vocab_multiple;
  config.n_layer = 0;
  for (const auto& [gpt2, name] : stored) {
    if (!gpt2.starts_with("h.")) continue;
    const size_t dot = gpt2.find('.', 2);
    const std::string index = gpt2.substr(2, dot == std::string::npos ? dot : dot - 2);
    if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
        index.size() < 10)
      config.n_layer = std::max<int64_t>(config.n_layer, std::stoll(index) + 1);
  }
  const auto head = stored.find("lm_head.weight");
  config.tie_embeddings = head == stored.end() || bitwise_equal(f32(file, head->second),
                                                                f32(file, stored.at("wte.weight")));
  return config;
}

Gpt2Weights::Gpt2Weights(const std::string& path, const nn::GptConfig& config)
    : file_(load_safetensors(path)) {
  std::vector<std::string> twice;
  stored_ = stored_names(file_, &twice);
  std::vector<std::string> missing, misshaped, extra;
  std::set<std::string> expected;
  for (const Gpt2Tensor& t : gpt2_tensors(config)) {
    expected.insert(t.gpt2.name);
    const auto it = stored_.find(t.gpt2.name);
    if (it == stored_.end()) {
      missing.push_back(fmt::format("missing {}: expected {}", t.gpt2.name, shape_str(t.shape)));
      continue;
    }
    const SafetensorsEntry& e = file_.entry(it->second);
    if (e.shape != t.shape) {
      const bool transposed = e.shape.size() == 2 && t.shape.size() == 2 &&
                              e.shape[0] == t.shape[1] && e.shape[1] == t.shape[0];
      misshaped.push_back(
          fmt::format("{} is {}, expected {}{}", it->second, shape_str(e.shape), shape_str(t.shape),
                      transposed ? " (transposed: GPT-2's Conv1D stores [in, out])" : ""));
    } else if (!is_float(e.file_dtype)) {
      misshaped.push_back(fmt::format("{} {} is {}, expected a floating-point dtype", it->second,
                                      shape_str(e.shape), e.file_dtype));
    }
  }
  for (const auto& [gpt2, name] : stored_) {
    if (expected.count(gpt2)) continue;
    const SafetensorsEntry& e = file_.entry(name);
    if (gpt2 != "lm_head.weight") {
      extra.push_back(fmt::format("extra {} {}: a model of this shape has no such tensor", name,
                                  shape_str(e.shape)));
      continue;
    }
    // A tied head: GPT-2 files may store the shared matrix a second time.
    const Shape want = {config.vocab_size, config.n_embd};
    if (e.shape != want) {
      misshaped.push_back(fmt::format("{} is {}, expected {} (tied to wte.weight)", name,
                                      shape_str(e.shape), shape_str(want)));
    } else if (!is_float(e.file_dtype)) {
      misshaped.push_back(fmt::format("{} {} is {}, expected a floating-point dtype", name,
                                      shape_str(e.shape), e.file_dtype));
    } else if (const auto wte = stored_.find("wte.weight");
               wte != stored_.end() && file_.entry(wte->second).shape == want &&
               is_float(file_.entry(wte->second).file_dtype) &&
               !bitwise_equal(f32(file_, name), f32(file_, wte->second))) {
      extra.push_back(fmt::format(
          "{} {} differs from {}, but this model ties its head to wte.weight "
          "(model.tie_embeddings: true); set tie_embeddings: false to load a separate head",
          name, shape_str(e.shape), wte->second));
    }
  }
  std::vector<std::string> problems = twice;
  for (auto* list : {&missing, &misshaped, &extra})
    problems.insert(problems.end(), list->begin(), list->end());
  if (problems.empty()) return;
  std::string lines;
  for (const std::string& p : problems) lines += "\n  " + p;
  BRAID_FAIL("{} does not hold the GPT-2 weights of this model ({}): {} problem{}:{}", path,
             describe(config), problems.size(), problems.size() == 1 ? "" : "s", lines);
}

Tensor Gpt2Weights::whole(const std::string& braid_name, const Shape& shape) const {
  const std::optional<Gpt2Name> target = gpt2_name(braid_name);
  BRAID_CHECK(target.has_value(), "parameter '{}' has no GPT-2 counterpart", braid_name);
  const auto it = stored_.find(target->name);
  BRAID_CHECK(it != stored_.end(), "{} has no {} (for parameter '{}')", file_.path(), target->name,
              braid_name);
  return from_gpt2(*target, f32(file_, it->second), shape);
}

void load_gpt2_weights(const std::string& path, nn::Gpt& model) {
  const Gpt2Weights weights(path, model.config());
  autograd::NoGradGuard no_grad;
  const auto specs = model.shard_specs();
  for (const auto& [name, param] : model.named_parameters()) {
    BRAID_CHECK(param.device().is_cpu(),
                "GPT-2 weights load into parameters on the host; '{}' is on {} (load before "
                "Module::to)",
                name, param.device().str());
    const nn::ShardSpec& spec = specs.at(name);
    const Tensor whole = weights.whole(name, spec.global_shape);
    param.detach().copy_(spec.slice(whole).reshape(param.shape()));
  }
}

}  // namespace braid::ckpt
