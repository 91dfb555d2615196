// The facts the host recorded about device tensors of ids, keyed by storage.
#include "braid/ops/host_checked.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace braid::ops {
namespace {

struct Entry {
  std::weak_ptr<Storage> storage;
  const Storage* key;
  int64_t offset, numel;
  HostCheckedIds facts;
};

// Few entries live at once (a batch or two ahead, cached positions): a pruned vector.
std::mutex g_mutex;
std::vector<Entry>& entries() {
  static auto* e = new std::vector<Entry>();  // used from Storage-owning statics at exit too
  return *e;
}

}  // namespace

HostCheckedIds host_check(const Tensor& values) {
  BRAID_CHECK(values.device().is_cpu() && values.dtype() == DType::i32 && values.is_contiguous(),
              "host_check needs a dense host i32 tensor, got {} on {}", values.str(),
              values.device().str());
  HostCheckedIds f;
  f.min = INT32_MAX;
  f.max = INT32_MIN;
  const int32_t* v = values.data<int32_t>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (v[i] == -1) {
      ++f.minus_ones;
      continue;
    }
    f.min = std::min(f.min, v[i]);
    f.max = std::max(f.max, v[i]);
  }
  if (f.min > f.max) f = {0, -1, f.minus_ones};
  return f;
}

void mark_host_checked(const Tensor& t, const HostCheckedIds& facts) {
  BRAID_CHECK(!t.device().is_cpu() && t.is_contiguous(),
              "mark_host_checked is for dense device tensors, got {} on {}", t.str(),
              t.device().str());
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& all = entries();
  std::erase_if(all, [](const Entry& e) { return e.storage.expired(); });
  all.push_back({t.storage(), t.storage().get(), t.offset(), t.numel(), facts});
}

std::optional<HostCheckedIds> host_checked(const Tensor& t) {
  if (!t.defined() || t.device().is_cpu() || !t.is_contiguous()) return std::nullopt;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Entry& e : entries()) {
    // The key alone could name a newer storage at a freed one's address; the weak pointer not.
    if (e.key != t.storage().get() || e.offset != t.offset() || e.numel != t.numel()) continue;
    const std::shared_ptr<Storage> live = e.storage.lock();
    if (live && live.get() == t.storage().get()) return e.facts;
  }
  return std::nullopt;
}

Tensor check_ids_in_range(const Tensor& ids, int64_t limit, std::string_view what) {
  if (const std::optional<HostCheckedIds> known = host_checked(ids)) {
    BRAID_CHECK(known->minus_ones == 0 &&
                    (known->max < known->min || (known->min >= 0 && known->max < limit)),
                "token ids in [{}, {}] (and {} of -1) are outside the {} [0, {})", known->min,
                known->max, known->minus_ones, what, limit);
    return Tensor();
  }
  Tensor host = ids.device().is_cpu() ? ids.contiguous() : ids.to(Device::cpu());
  const int32_t* id = host.data<int32_t>();
  for (int64_t i = 0; i < host.numel(); ++i)
    BRAID_CHECK(id[i] >= 0 && id[i] < limit, "token id {} at position {} is outside the {} [0, {})",
                id[i], i, what, limit);
  return host;
}

}  // namespace braid::ops
