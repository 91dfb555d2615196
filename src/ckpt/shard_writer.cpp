// Shard files with per-chunk checksums, and the rank-0 half of the commit protocol.
#include "shard_writer.h"

#include <algorithm>
#include <cerrno>

#include "checkpoint_dir.h"
#include "chunked_file_writer.h"
#include "fault_injection.h"
#include "snapshot_image.h"

namespace braid::ckpt {
RankState shard_entries(const std::map<std::string, nn::ShardSpec>& specs,
                        const std::vector<optim::StateShard>& shards) {
  RankState out;
  // A flat range of a tensor, one entry per box it covers.
  auto add = [&](const std::string& key, const Tensor& flat,
                 const std::vector<nn::ShardSpec>& boxes) {
    int64_t offset = 0;
    for (const nn::ShardSpec& box : boxes) {
      const Tensor part = flat.narrow(0, offset, box.local_numel());
      out.entries.push_back({key, part, box});
      offset += box.local_numel();
    }
  };
  for (const optim::StateShard& shard : shards) {
    const std::vector<nn::ShardSpec> boxes = specs.at(shard.name).pieces(shard.begin, shard.length);
    add("model/" + shard.name, shard.value, boxes);
    for (const auto& [state, t] : shard.state) add("optim/" + shard.name + "/" + state, t, boxes);
    out.param_steps[shard.name] = shard.steps;
  }
  return out;
}

std::vector<ShardEntry> unoptimized_entries(const nn::Module& model,
                                            const optim::Optimizer& optimizer,
                                            const std::set<std::string>& skip, bool copy) {
  std::set<std::string> optimized;
  for (const auto& e : optimizer.params()) optimized.insert(e.name);
  const auto specs = model.shard_specs();
  std::vector<ShardEntry> out;
  for (const auto& [name, param] : model.named_parameters())
    if (!optimized.count(name) && !skip.count(name))
      out.push_back({"model/" + name, param, specs.at(name)});
  if (copy) snapshot_values(out);
  return out;
}

RankState collect_rank_state(const nn::Module& model, const optim::Optimizer& optimizer,
                             const std::vector<optim::StateShard>& shards,
                             const std::set<std::string>& skip, bool with_unoptimized) {
  RankState out = shard_entries(model.shard_specs(), shards);
  if (with_unoptimized)
    for (ShardEntry& e : unoptimized_entries(model, optimizer, skip, /*copy=*/false))
      out.entries.push_back(std::move(e));
  return out;
}

std::vector<optim::StateShard> shards_to_write(const optim::OwnedState& owned,
                                               const std::set<std::string>& skip,
                                               bool first_replica) {
  std::vector<optim::StateShard> out;
  if (owned.replicated && !first_replica) return out;
  for (const optim::StateShard& s : owned.shards)
    if (!skip.count(s.name)) out.push_back(s);
  return out;
}

std::set<std::string> whole_parameters_written_by_tp0(const nn::Module& model, int tp_rank) {
  std::set<std::string> names;
  if (tp_rank == 0) return names;
  for (const auto& [name, spec] : model.shard_specs())
    if (spec.is_whole()) names.insert(name);
  return names;
}

void write_rank_shard(const fs::path& folder, int rank, std::vector<ShardEntry>& entries,
                      const std::map<std::string, int64_t>& param_steps, int64_t step) {
  int64_t total = 0;  // the file's size: every slice starts on a block boundary
  for (ShardEntry& e : entries) {
    if (e.image_offset < 0) e.values = e.values.contiguous();
    total = round_up_to_block(total) + static_cast<int64_t>(e.values.nbytes());
  }
  const fs::path data_file = folder / rank_data_file(rank);
  if (fault_requested("enospc", step, rank))
    fail_write("writing", data_file, total / 2, total, ENOSPC, " [injected]");
  proto::RankManifest manifest;
  manifest.set_rank(rank);
  auto add_slice = [&](const ShardEntry& e, int64_t offset, const std::vector<uint32_t>& crcs) {
    proto::TensorSlice* slice = manifest.add_tensors();
    slice->set_name(e.name);
    slice->set_dtype(std::string(dtype_name(e.values.dtype())));
    set_spec(*slice, e.shard);
    slice->set_file(rank_data_file(rank));
    slice->set_byte_offset(offset);
    slice->set_byte_length(static_cast<int64_t>(e.values.nbytes()));
    slice->set_chunk_bytes(kChunkBytes);
    for (uint32_t crc : crcs) slice->add_chunk_crc32c(crc);
  };
  ChunkedFileWriter file(data_file, total);
  auto crash_mid_file = [&] {
    if (!fault_requested("mid_file", step, rank)) return;
    file.finish();
    crash_if_requested("mid_file", step, rank);
  };
  // The snapshot image goes first, in place, its checksums taken by the copy; then the
  // entries outside it (values not dense on the host, and every entry of an offline
  // `convert`), staged and checksummed here.
  if (const StoragePtr image = image_of(entries)) {
    const char* bytes = static_cast<const char*>(image->data());
    int64_t size = 0;  // up to the last entry's last byte, as a file written piece by piece
    for (const ShardEntry& e : entries)
      if (e.image_offset >= 0)
        size = std::max(size, e.image_offset + static_cast<int64_t>(e.values.nbytes()));
    const int64_t half = size / 2 / kFileBlockBytes * kFileBlockBytes;
    const int64_t start = file.append_image(bytes, half);
    crash_mid_file();
    file.append_image(bytes + half, size - half);
    for (const ShardEntry& e : entries)
      if (e.image_offset >= 0) add_slice(e, start + e.image_offset, e.chunk_crc32c);
  }
  std::vector<const ShardEntry*> rest;
  for (const ShardEntry& e : entries)
    if (e.image_offset < 0) rest.push_back(&e);
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i == rest.size() / 2) crash_mid_file();
    const ShardEntry& e = *rest[i];
    const ChunkedFileWriter::Piece piece =
        file.append(e.values.data_ptr(), static_cast<int64_t>(e.values.nbytes()), kChunkBytes);
    add_slice(e, piece.offset, piece.chunk_crc32c);
  }
  file.finish();
  for (const auto& [param, steps] : param_steps) (*manifest.mutable_param_steps())[param] = steps;
  write_message(folder / rank_manifest_file(rank), manifest);
  crash_if_requested("before_commit", step, rank);
}

void commit_checkpoint(const fs::path& dir, const fs::path& tmp, proto::Manifest global,
                       int writers, int keep) {
  const std::string name = step_folder_name(global.step());
  int found = 0;
  for (const auto& entry : fs::directory_iterator(tmp)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("rank_", 0) != 0 || entry.path().extension() != ".manifest") continue;
    proto::RankManifest part;
    read_message(entry.path(), part);
    for (const auto& t : part.tensors()) *global.add_tensors() = t;
    for (const auto& [param, steps] : part.param_steps())
      (*global.mutable_param_steps())[param] = steps;
    ++found;
  }
  BRAID_CHECK(found == writers, "checkpoint {}: {} of {} ranks wrote their shard", name, found,
              writers);
  write_message(tmp / kManifestFile, global);
  const fs::path final_folder = dir / name;
  // Re-saving a step (after a resume from an older checkpoint) replaces it.
  if (fs::exists(final_folder)) remove_checkpoint(final_folder);
  fs::rename(tmp, final_folder);
  fsync_folder(dir);
  crash_if_requested("latest", global.step(), 0);
  write_file(dir / kLatestFile, name + "\n", /*atomic=*/true);
  if (keep > 0) {
    std::vector<fs::path> committed = committed_checkpoints(dir);
    for (size_t i = 0; i + keep < committed.size(); ++i)
      if (committed[i] != final_folder) remove_checkpoint(committed[i]);
  }
}

}  // namespace braid::ckpt
