// Loading a committed checkpoint into this rank's shards, whatever layout saved it.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <map>

#include "braid/autograd/grad_mode.h"
#include "braid/ckpt/checkpoint.h"
#include "braid/core/logging.h"
#include "format.h"

namespace braid::ckpt {
namespace {

using SliceIndex = std::map<std::string, std::vector<const proto::TensorSlice*>>;

template <class Map>
std::string describe_grid(const Map& grid) {
  std::string out;
  for (const char* axis : {"tp", "cp", "pp", "dp"})
    if (auto it = grid.find(axis); it != grid.end()) out += fmt::format("{}={} ", axis, it->second);
  return out.empty() ? out : out.substr(0, out.size() - 1);
}

// Fills `dst` (this rank's shard `want` of tensor `key`) from the saved slices of `key`.
void restore(const fs::path& folder, const SliceIndex& index, const std::string& key,
             const nn::ShardSpec& want, Tensor dst) {
  auto it = index.find(key);
  BRAID_CHECK(it != index.end(),
              "checkpoint {} has no tensor '{}' (saved from a different model or optimizer?)",
              folder.string(), key);
  const Shape saved_shape(it->second.front()->global_shape().begin(),
                          it->second.front()->global_shape().end());
  const bool same_shape = saved_shape == want.global_shape;
  if (!same_shape)
    BRAID_CHECK(saved_shape.size() == want.global_shape.size() && saved_shape.size() == 2 &&
                    saved_shape[1] == want.global_shape[1],
                "tensor '{}' is {} in checkpoint {} but {} in this model", key,
                shape_str(saved_shape), folder.string(), shape_str(want.global_shape));
  // Slices wholly outside the global index range this shard covers are not read (a box's
  // row-major global indices increase, so its first and last element bound it).
  const int64_t lo = want.global_index(0), hi = want.global_index(want.local_numel() - 1);
  Tensor whole = Tensor::zeros(saved_shape);
  for (const proto::TensorSlice* slice : it->second) {
    const nn::ShardSpec have = spec_of(*slice);
    if (same_shape && (have.global_index(have.local_numel() - 1) < lo || have.global_index(0) > hi))
      continue;
    BRAID_CHECK(slice->dtype() == "f32", "tensor '{}' is stored as {}; this build loads f32", key,
                slice->dtype());
    const std::vector<char> bytes = read_slice(folder, *slice);
    BRAID_CHECK(static_cast<int64_t>(bytes.size()) == have.local_numel() * 4,
                "tensor '{}' in {}: {} bytes for {} values", key, slice->file(), bytes.size(),
                have.local_numel());
    Tensor values = Tensor::empty({have.local_numel()});
    std::memcpy(values.data_ptr(), bytes.data(), bytes.size());
    have.place(values, whole);
  }
  if (!same_shape) {
    // Vocabulary padding differs between layouts (it is a multiple of tp): the rows both
    // share are the data, the rest are padding and must be zero.
    const int64_t rows = std::min(saved_shape[0], want.global_shape[0]);
    if (saved_shape[0] > rows) {
      const Tensor extra = whole.narrow(0, rows, saved_shape[0] - rows).contiguous();
      for (float v : extra.to_vector())
        BRAID_CHECK(v == 0.0f,
                    "tensor '{}': checkpoint {} has non-zero rows beyond this model's {}", key,
                    folder.string(), want.global_shape[0]);
    }
    Tensor resized = Tensor::zeros(want.global_shape);
    resized.narrow(0, 0, rows).copy_(whole.narrow(0, 0, rows));
    whole = resized;
  }
  dst.copy_(want.slice(whole).reshape(dst.shape()));
}

// Fills the optimizer state of `live` (flat ranges of this rank's shards) from the saved slices.
void restore_live(const fs::path& folder, const SliceIndex& index,
                  const std::map<std::string, nn::ShardSpec>& shards,
                  const optim::OwnedState& live) {
  for (const optim::StateShard& s : live.shards) {
    const nn::ShardSpec& spec = shards.at(s.name);
    for (const auto& [state_name, view] : s.state) {
      Tensor local = Tensor::empty({spec.local_numel()});
      restore(folder, index, "optim/" + s.name + "/" + state_name, spec, local);
      Tensor(view).copy_(local.narrow(0, s.begin, s.length));  // a view: writes the live state
    }
  }
}

}  // namespace

bool has_committed_checkpoint(const std::string& dir) {
  return !dir.empty() && !committed_checkpoints(dir).empty();
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p = path;
  if (fs::exists(p / kManifestFile)) return p.string();
  if (fs::exists(p / kLatestFile)) {
    std::ifstream in(p / kLatestFile);
    std::string name;
    in >> name;
    BRAID_CHECK(!name.empty(), "{} is empty", (p / kLatestFile).string());
    BRAID_CHECK(fs::exists(p / name / kManifestFile),
                "{} names {}, which is not a committed checkpoint (no {})",
                (p / kLatestFile).string(), name, kManifestFile);
    return (p / name).string();
  }
  // A crash after the first commit's rename but before `latest` was written: the manifest is
  // the commit, `latest` only a pointer to it.
  const std::vector<fs::path> committed = committed_checkpoints(p);
  if (!committed.empty()) return committed.back().string();
  BRAID_CHECK(fs::exists(p), "checkpoint path {} does not exist", path);
  BRAID_FAIL("{} is neither a checkpoint (no {}) nor a folder of committed checkpoints", path,
             kManifestFile);
}

TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, const dist::ParallelGrid& grid,
                              const LoadOptions& options, const optim::OwnedState* live) {
  Layout layout;
  for (const auto& axis : grid.axes()) layout[axis.name] = axis.size;
  return load_checkpoint(path, model, optimizer, layout, options, live);
}

TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, const Layout& current,
                              const LoadOptions& options, const optim::OwnedState* live) {
  std::vector<std::string> candidates;
  try {
    candidates.push_back(resolve_checkpoint(path));
  } catch (const Error& e) {
    if (!options.fallback_to_previous) throw;
    log().warn("{}; trying older checkpoints", e.what());
  }
  if (options.fallback_to_previous) {
    std::vector<fs::path> committed = committed_checkpoints(path);
    for (auto it = committed.rbegin(); it != committed.rend(); ++it)
      if (candidates.empty() || it->string() != candidates.front())
        candidates.push_back(it->string());
  }
  BRAID_CHECK(!candidates.empty(), "no committed checkpoint in {}", path);
  for (size_t attempt = 0;; ++attempt) {
    const fs::path folder = candidates[attempt];
    try {
      autograd::NoGradGuard no_grad;
      proto::Manifest manifest;
      read_message(folder / kManifestFile, manifest);
      BRAID_CHECK(manifest.format_version() == kFormatVersion,
                  "checkpoint {} has format version {}; this build reads version {}",
                  folder.string(), manifest.format_version(), kFormatVersion);
      bool same_layout = true;
      for (const auto& [axis, size] : current) {
        auto saved = manifest.grid().find(axis);
        same_layout =
            same_layout && (saved == manifest.grid().end() ? size == 1 : saved->second == size);
      }
      BRAID_CHECK(same_layout || options.allow_reshard,
                  "checkpoint {} was saved under {}, this run is {}; allow resharding "
                  "(checkpoint.reshard: true) to load it into this layout",
                  folder.string(), describe_grid(manifest.grid()), describe_grid(current));
      SliceIndex index;
      for (const auto& t : manifest.tensors()) index[t.name()].push_back(&t);
      const auto shards = model.shard_specs();
      for (const auto& [name, param] : model.named_parameters())
        restore(folder, index, "model/" + name, shards.at(name), param.detach());
      if (live) restore_live(folder, index, shards, *live);
      std::vector<int64_t> steps;
      for (size_t i = 0; i < optimizer.params().size(); ++i) {
        const std::string& name = optimizer.params()[i].name;
        if (!live)
          for (const auto& [state_name, t] : optimizer.param_state(i))
            restore(folder, index, "optim/" + name + "/" + state_name, shards.at(name), t);
        auto s = manifest.param_steps().find(name);
        BRAID_CHECK(s != manifest.param_steps().end(),
                    "checkpoint {} has no optimizer step count for '{}'", folder.string(), name);
        steps.push_back(s->second);
      }
      optimizer.restore_steps(manifest.optimizer_steps(), steps);
      TrainingState state;
      state.step = manifest.step();
      state.sampler = {manifest.sampler().seed(), manifest.sampler().epoch(),
                       manifest.sampler().position()};
      state.config = manifest.config();
      log().info("loaded checkpoint {} (step {}, saved under {})", folder.string(), state.step,
                 describe_grid(manifest.grid()));
      return state;
    } catch (const Error& e) {
      if (!options.fallback_to_previous || attempt + 1 == candidates.size()) throw;
      log().warn("checkpoint {} cannot be loaded ({}); falling back to {}", folder.string(),
                 e.what(), candidates[attempt + 1]);
    }
  }
}

}  // namespace braid::ckpt
