// Loading a committed checkpoint into this rank's shards, whatever layout saved it.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <set>

#include "braid/autograd/grad_mode.h"
#include "braid/ckpt/checkpoint.h"
#include "braid/core/logging.h"
#include "checkpoint_dir.h"
#include "fault_injection.h"
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

// Reads slices of one checkpoint, checking along the way the manifest of every rank whose
// file it reads (the global manifest repeats their contents, but a damaged one must not pass).
struct Reader {
  fs::path folder;
  const SliceIndex& index;
  std::set<std::string> checked_files = {};

  std::vector<char> read(const proto::TensorSlice& slice) {
    if (checked_files.insert(slice.file()).second) {
      proto::RankManifest rank_manifest;
      read_message(folder / fs::path(slice.file()).replace_extension(".manifest"), rank_manifest);
    }
    return read_slice(folder, slice);
  }
};

// Fills `dst` (this rank's shard `want` of tensor `key`) from the saved slices of `key`.
void restore(Reader& reader, const std::string& key, const nn::ShardSpec& want, Tensor dst) {
  const fs::path& folder = reader.folder;
  const SliceIndex& index = reader.index;
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
    const std::vector<char> bytes = reader.read(*slice);
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
void restore_live(Reader& reader, const std::map<std::string, nn::ShardSpec>& shards,
                  const optim::OwnedState& live) {
  for (const optim::StateShard& s : live.shards) {
    const nn::ShardSpec& spec = shards.at(s.name);
    for (const auto& [state_name, view] : s.state) {
      Tensor local = Tensor::empty({spec.local_numel()});
      restore(reader, "optim/" + s.name + "/" + state_name, spec, local);
      Tensor(view).copy_(local.narrow(0, s.begin, s.length));  // a view: writes the live state
    }
  }
}

}  // namespace

bool has_committed_checkpoint(const std::string& dir) {
  return !dir.empty() && !committed_checkpoints(dir).empty();
}

std::string resolve_checkpoint(const std::string& path) {
  const std::vector<fs::path> newest = resume_candidates(path, /*all=*/false);
  if (!newest.empty()) return newest.front().string();
  BRAID_CHECK(fs::exists(path), "checkpoint path {} does not exist", path);
  BRAID_FAIL("{} is neither a checkpoint (no {}) nor a folder of committed checkpoints", path,
             kManifestFile);
}

namespace {

// Loads the committed checkpoint `folder` into this rank's shards; throws on any problem.
TrainingState load_folder(const fs::path& folder, nn::Module& model, optim::Optimizer& optimizer,
                          const Layout& current, const LoadOptions& options,
                          const optim::OwnedState* live, int rank) {
  autograd::NoGradGuard no_grad;
  proto::Manifest manifest;
  read_message(folder / kManifestFile, manifest);
  BRAID_CHECK(manifest.format_version() == kFormatVersion,
              "checkpoint {} has format version {}; this build reads version {}", folder.string(),
              manifest.format_version(), kFormatVersion);
  const int64_t named = step_of_folder(folder.filename().string());
  BRAID_CHECK(named < 0 || named == manifest.step(),
              "checkpoint {} holds step {}, not the step its name says", folder.string(),
              manifest.step());
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
  Reader reader{folder, index};
  const auto shards = model.shard_specs();
  for (const auto& [name, param] : model.named_parameters())
    restore(reader, "model/" + name, shards.at(name), param.detach());
  crash_if_requested("load", manifest.step(), rank);
  // Weights only (braid-ckpt import: no optimizer state, no update taken): the optimizer state
  // stays as fresh as it is.
  const bool weights_only =
      manifest.optimizer_steps() == 0 &&
      std::none_of(manifest.tensors().begin(), manifest.tensors().end(),
                   [](const proto::TensorSlice& t) { return t.name().starts_with("optim/"); });
  if (live && !weights_only) restore_live(reader, shards, *live);
  std::vector<int64_t> steps;
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    const std::string& name = optimizer.params()[i].name;
    if (!live && !weights_only)
      for (const auto& [state_name, t] : optimizer.param_state(i))
        restore(reader, "optim/" + name + "/" + state_name, shards.at(name), t);
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
  return state;
}

// Where a resume from `path` has nothing to load: the reason, in words.
std::string nothing_to_load(const std::string& path) {
  if (!fs::exists(path)) return fmt::format("checkpoint path {} does not exist", path);
  return fmt::format("{} is neither a checkpoint (no {}) nor a folder of committed checkpoints",
                     path, kManifestFile);
}

// The order in which the ranks agree on candidates: the step a folder's name gives (a folder
// named otherwise is the only candidate, so any number serves).
int64_t candidate_key(const fs::path& folder) {
  return std::max<int64_t>(step_of_folder(folder.filename().string()), 0);
}

int64_t all_reduce_min(dist::ProcessGroup& group, int64_t value) {
  Tensor t = Tensor::empty({1}, DType::i64);
  *t.data<int64_t>() = value;
  group.all_reduce(t, dist::ReduceOp::min)->wait();
  return *t.data<int64_t>();
}

// Every rank's `text` (cut to 1000 bytes), in rank order. Collective over `group`.
std::vector<std::string> all_gather_text(dist::ProcessGroup& group, std::string text) {
  if (text.size() > 1000) text = text.substr(0, 1000) + "...";
  const int64_t longest = -all_reduce_min(group, -static_cast<int64_t>(text.size()));
  const int64_t width = std::max<int64_t>(longest, 1);
  Tensor mine = Tensor::zeros({width}, DType::u8);
  std::memcpy(mine.data_ptr(), text.data(), text.size());
  Tensor all = Tensor::empty({width * group.size()}, DType::u8);
  group.all_gather(mine, all)->wait();
  std::vector<std::string> out;
  for (int r = 0; r < group.size(); ++r) {
    const char* begin = static_cast<const char*>(all.data_ptr()) + r * width;
    out.emplace_back(begin, strnlen(begin, static_cast<size_t>(width)));
  }
  return out;
}

}  // namespace

TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, const dist::ParallelGrid& grid,
                              const LoadOptions& options, const optim::OwnedState* live) {
  Layout layout;
  for (const auto& axis : grid.axes()) layout[axis.name] = axis.size;
  std::vector<int> everyone(grid.world()->size());
  for (int r = 0; r < grid.world()->size(); ++r) everyone[r] = r;
  // Its own group: a load never interleaves with collectives the caller may have in flight.
  const dist::ProcessGroupPtr channel = grid.world()->split(everyone, "checkpoint-load");
  const int rank = grid.world()->rank();
  const std::vector<fs::path> mine = resume_candidates(path, options.fallback_to_previous);
  std::vector<std::string> failures;  // "step_N: rank r: why", oldest attempt first
  int64_t bound = INT64_MAX;
  for (;;) {
    // The newest candidate below `bound` that every rank has (the smallest of their newest).
    int64_t pick = -1;
    for (const fs::path& folder : mine)
      if (candidate_key(folder) < bound) {
        pick = candidate_key(folder);
        break;
      }
    const int64_t agreed = all_reduce_min(*channel, pick);
    if (agreed < 0) break;
    const auto it = std::find_if(mine.begin(), mine.end(),
                                 [&](const fs::path& f) { return candidate_key(f) == agreed; });
    std::string error;
    TrainingState state;
    if (it == mine.end()) {
      error = fmt::format("this rank sees no committed checkpoint for step {} in {}", agreed, path);
    } else {
      try {
        state = load_folder(*it, model, optimizer, layout, options, live, rank);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    const bool everyone_loaded = all_reduce_min(*channel, error.empty() ? 1 : 0) == 1;
    if (everyone_loaded) {
      if (rank == 0)
        log().info("loaded checkpoint {} (step {}) on every rank", it->string(), state.step);
      return state;
    }
    const std::string name =
        it == mine.end() ? fmt::format("step {}", agreed) : it->filename().string();
    const std::vector<std::string> errors = all_gather_text(*channel, error);
    std::string why;
    for (int r = 0; r < channel->size(); ++r)
      if (!errors[r].empty())
        why += fmt::format("{}rank {}: {}", why.empty() ? "" : "; ", r, errors[r]);
    failures.push_back(fmt::format("{}: {}", name, why));
    if (!options.fallback_to_previous)
      BRAID_FAIL(
          "checkpoint {} cannot be loaded: {} (checkpoint.fallback: true would try the "
          "previous committed checkpoint instead)",
          it == mine.end() ? name : it->string(), why);
    if (rank == 0)
      log().warn(
          "checkpoint {} does not load on every rank ({}); every rank tries the previous one", name,
          why);
    bound = agreed;
  }
  if (failures.empty()) BRAID_FAIL("{}", nothing_to_load(path));
  std::string all;
  for (const std::string& f : failures) all += (all.empty() ? "" : " | ") + f;
  BRAID_FAIL("no checkpoint in {} loads on every rank: {}", path, all);
}

TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, const Layout& current,
                              const LoadOptions& options, const optim::OwnedState* live) {
  const std::vector<fs::path> candidates = resume_candidates(path, options.fallback_to_previous);
  BRAID_CHECK(!candidates.empty(), "{}", nothing_to_load(path));
  for (size_t attempt = 0;; ++attempt) {
    try {
      TrainingState state =
          load_folder(candidates[attempt], model, optimizer, current, options, live, 0);
      log().info("loaded checkpoint {} (step {})", candidates[attempt].string(), state.step);
      return state;
    } catch (const Error& e) {
      if (!options.fallback_to_previous || attempt + 1 == candidates.size()) throw;
      log().warn("checkpoint {} cannot be loaded ({}); falling back to {}",
                 candidates[attempt].string(), e.what(), candidates[attempt + 1].string());
    }
  }
}

}  // namespace braid::ckpt
