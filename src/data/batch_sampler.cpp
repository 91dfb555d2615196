// BatchSampler: window layout, keyed permutation, and batch assembly (see the header for why).
#include "braid/data/batch_sampler.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "braid/core/error.h"

namespace braid::data {
namespace {

// Tags keep the hash streams for offsets and permutations independent of each other.
constexpr uint64_t kOffsetTag = 0x6f66667365747321ull;
constexpr uint64_t kPermuteTag = 0x7065726d75746521ull;
// Six Feistel rounds mix well enough for data order; four already give a bijection.
constexpr int kFeistelRounds = 6;

// The splitmix64 finaliser: a cheap bijective mix whose output bits all depend on every input
// bit. Counter-based: hash(seed, epoch, i) needs no state, so any position is reachable at once.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  return mix64(mix64(mix64(a) ^ b) ^ c);
}

}  // namespace

BatchSampler::BatchSampler(TokenDataset dataset, SamplerConfig config)
    : dataset_(std::move(dataset)), config_(config), seed_(config.seed) {
  BRAID_CHECK(config_.batch_size >= 1, "sampler batch_size must be >= 1, got {}",
              config_.batch_size);
  BRAID_CHECK(config_.seq_len >= 1, "sampler seq_len must be >= 1, got {}", config_.seq_len);
  BRAID_CHECK(config_.dp_size >= 1, "sampler dp_size must be >= 1, got {}", config_.dp_size);
  BRAID_CHECK(config_.dp_rank >= 0 && config_.dp_rank < config_.dp_size,
              "sampler dp_rank {} is outside [0, dp_size = {})", config_.dp_rank, config_.dp_size);
  global_batch_ = config_.batch_size * config_.dp_size;

  const int64_t t = config_.seq_len;
  const size_t shards = dataset_.num_shards();
  windows_.assign(shards, 0);
  max_offset_.assign(shards, 0);
  first_window_.assign(shards + 1, 0);
  for (size_t s = 0; s < shards; ++s) {
    const int64_t size = dataset_.shard(s).size();
    if (size >= t + 1) {
      if (config_.shuffle) {
        // Fix the count at what the largest offset still allows, so every epoch has the same
        // number of windows whatever offset it draws (at most one window fewer than offset 0).
        windows_[s] = std::max<int64_t>(1, (size - t) / t);
        max_offset_[s] = std::min(t - 1, size - 1 - windows_[s] * t);
      } else {
        windows_[s] = (size - 1) / t;
      }
    }
    first_window_[s + 1] = first_window_[s] + windows_[s];
  }
  num_windows_ = first_window_[shards];
  BRAID_CHECK(num_windows_ >= global_batch_,
              "the dataset ({} tokens in {} shard(s), first '{}') holds {} windows of seq_len + 1 "
              "= {} tokens, fewer than one global batch of batch_size {} x dp_size {} = {}; use "
              "a smaller batch or seq_len, or more data",
              dataset_.total_tokens(), shards, dataset_.shard(0).path().string(), num_windows_,
              t + 1, config_.batch_size, config_.dp_size, global_batch_);
}

int64_t BatchSampler::shard_offset(uint64_t epoch, int64_t shard) const {
  const int64_t max_offset = max_offset_[static_cast<size_t>(shard)];
  if (max_offset == 0) return 0;
  const uint64_t h = hash3(seed_ ^ kOffsetTag, epoch, static_cast<uint64_t>(shard));
  return static_cast<int64_t>(h % static_cast<uint64_t>(max_offset + 1));
}

// A Feistel network over the smallest even-bit-width domain that covers [0, n), with cycle
// walking: outputs >= n are permuted again until they land inside. Each round is invertible, so
// the whole map is a bijection of the domain and, by walking, of [0, n). The domain is < 4n, so
// a walk takes fewer than four rounds of the network on average.
uint64_t BatchSampler::permute(uint64_t epoch, uint64_t index) const {
  const auto n = static_cast<uint64_t>(num_windows_);
  if (!config_.shuffle || n <= 1) return index;
  const int half_bits = (std::bit_width(n - 1) + 1) / 2;
  const uint64_t mask = (uint64_t{1} << half_bits) - 1;
  const uint64_t key = hash3(seed_ ^ kPermuteTag, epoch, n);
  uint64_t x = index;
  do {
    uint64_t left = x >> half_bits;
    uint64_t right = x & mask;
    for (int round = 0; round < kFeistelRounds; ++round) {
      const uint64_t f = mix64(key ^ mix64(right ^ (static_cast<uint64_t>(round) << 56))) & mask;
      left ^= f;
      std::swap(left, right);
    }
    x = (left << half_bits) | right;
  } while (x >= n);
  return x;
}

WindowRef BatchSampler::window_at(uint64_t epoch, int64_t index) const {
  BRAID_CHECK(index >= 0 && index < num_windows_,
              "window index {} is outside [0, {}) (the windows of one epoch)", index, num_windows_);
  const auto w = static_cast<int64_t>(permute(epoch, static_cast<uint64_t>(index)));
  // The last shard whose first window is <= w; it has windows, since the next prefix is > w.
  const auto it = std::upper_bound(first_window_.begin(), first_window_.end(), w);
  const int64_t shard = (it - first_window_.begin()) - 1;
  const int64_t k = w - first_window_[static_cast<size_t>(shard)];
  return {shard, shard_offset(epoch, shard) + k * config_.seq_len};
}

Batch BatchSampler::next() {
  const int64_t b_rows = config_.batch_size;
  const int64_t t = config_.seq_len;
  // A state restored from another dp layout may leave less than a batch in this epoch.
  if (position_ + static_cast<uint64_t>(global_batch_) > static_cast<uint64_t>(num_windows_)) {
    ++epoch_;
    position_ = 0;
  }
  Batch batch{Tensor::empty({b_rows, t}, DType::i32), Tensor::empty({b_rows, t}, DType::i32)};
  int32_t* inputs = batch.inputs.data<int32_t>();
  int32_t* targets = batch.targets.data<int32_t>();
  const int64_t first = static_cast<int64_t>(position_) + config_.dp_rank * b_rows;
  for (int64_t row = 0; row < b_rows; ++row) {
    const WindowRef window = window_at(epoch_, first + row);
    const uint16_t* tokens =
        dataset_.shard(static_cast<size_t>(window.shard)).tokens().data() + window.start;
    for (int64_t i = 0; i < t; ++i) {
      inputs[row * t + i] = tokens[i];
      targets[row * t + i] = tokens[i + 1];
    }
  }
  position_ += static_cast<uint64_t>(global_batch_);
  if (position_ + static_cast<uint64_t>(global_batch_) > static_cast<uint64_t>(num_windows_)) {
    ++epoch_;
    position_ = 0;
  }
  return batch;
}

void BatchSampler::restore(const SamplerState& state) {
  BRAID_CHECK(state.position <= static_cast<uint64_t>(num_windows_),
              "sampler state position {} lies beyond this dataset's {} windows per epoch (seq_len "
              "{}, {} shard(s)); was it saved for a different dataset or seq_len?",
              state.position, num_windows_, config_.seq_len, dataset_.num_shards());
  seed_ = state.seed;
  epoch_ = state.epoch;
  position_ = state.position;
}

}  // namespace braid::data
