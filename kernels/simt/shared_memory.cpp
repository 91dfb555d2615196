// The shared-memory arena and its layout (shared_memory.h), and the entry points the translated
// __shared__ declarations call (builtins_memory.h).
#include "shared_memory.h"

#include <sys/mman.h>

#include <cstring>
#include <string>

#include "block.h"
#include "braid/core/error.h"
#include "builtins_memory.h"
#include "runtime_hooks.h"

namespace braid::simt {
namespace {

size_t align_up(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

void* map(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw Error("simt: cannot map " + std::to_string(bytes) + " bytes");
  return p;
}

constexpr unsigned char kPoison = 0xff;  // NaN as float, -1 as an integer
constexpr size_t kDynamicAlign = 128;

std::string array_name(const SharedArray& a) {
  return std::string("`") + a.name + "` (" + a.type + ", " + std::to_string(a.bytes) + " bytes)";
}

}  // namespace

SharedArena::SharedArena() {
  base_ = static_cast<char*>(map(kBytes));
  cells_ = static_cast<SharedCell*>(map(kBytes * sizeof(SharedCell)));
}

SharedArena::~SharedArena() {
  munmap(base_, kBytes);
  munmap(cells_, kBytes * sizeof(SharedCell));
}

void SharedArena::begin_block(Block& block, size_t dynamic_bytes) {
  (void)block;
  std::memset(static_cast<void*>(cells_), 0, used_ * sizeof(SharedCell));
  arrays_.clear();
  static_bytes_ = 0;
  dynamic_named_ = false;
  const size_t offset = align_up(kRedzone, kDynamicAlign);
  if (offset + dynamic_bytes + kRedzone > kBytes)
    throw Error("simt: " + std::to_string(dynamic_bytes) +
                " bytes of dynamic shared memory exceed the emulator's arena");
  arrays_.push_back({nullptr, offset, dynamic_bytes, "extern __shared__", "dynamic"});
  for (size_t i = 0; i < dynamic_bytes; ++i) cells_[offset + i].array = 1;
  std::memset(base_ + offset, kPoison, dynamic_bytes);
  used_ = offset + dynamic_bytes;
}

char* SharedArena::dynamic(const char* name) {
  if (!dynamic_named_) {
    arrays_[0].name = name;
    dynamic_named_ = true;
  }
  return base_ + arrays_[0].offset;
}

char* SharedArena::static_array(const void* slot, size_t bytes, size_t align, const char* name,
                                const char* type) {
  for (const SharedArray& a : arrays_)
    if (a.slot == slot) return base_ + a.offset;
  const size_t limit = launch_limits().static_shared_per_block;
  if (static_bytes_ + bytes > limit || arrays_.size() >= 0xfffe) {
    block_fault([&] {
      return FaultRecord{"shared memory limit exceeded",
                         "the static __shared__ arrays of the block need " +
                             std::to_string(static_bytes_ + bytes) + " bytes with `" + name +
                             "` (" + type + ", " + std::to_string(bytes) +
                             " bytes); the device allows " + std::to_string(limit),
                         {}};
    }());
  }
  const size_t offset = align_up(used_ + kRedzone, align < 16 ? 16 : align);
  if (offset + bytes + kRedzone > kBytes)
    block_fault([&] {
      return FaultRecord{"shared memory limit exceeded",
                         std::string("`") + name + "` does not fit the emulator's arena",
                         {}};
    }());
  arrays_.push_back({slot, offset, bytes, name, type});
  const auto id = static_cast<uint16_t>(arrays_.size());
  for (size_t i = 0; i < bytes; ++i) cells_[offset + i].array = id;
  std::memset(base_ + offset, kPoison, bytes);
  static_bytes_ += bytes;
  used_ = offset + bytes;
  return base_ + offset;
}

std::string SharedArena::describe(size_t offset, size_t bytes) const {
  const SharedArray* inside = nullptr;
  const SharedArray* below = nullptr;  // nearest array ending at or before offset
  const SharedArray* above = nullptr;  // nearest array starting after offset
  for (const SharedArray& a : arrays_) {
    if (offset >= a.offset && offset < a.offset + a.bytes) inside = &a;
    if (a.offset + a.bytes <= offset &&
        (!below || a.offset + a.bytes > below->offset + below->bytes))
      below = &a;
    if (a.offset > offset && (!above || a.offset < above->offset)) above = &a;
  }
  if (inside != nullptr) {
    std::string out =
        "at byte " + std::to_string(offset - inside->offset) + " of " + array_name(*inside);
    const size_t end = inside->offset + inside->bytes;
    if (offset + bytes > end)
      out += ", running " + std::to_string(offset + bytes - end) + " bytes past its end";
    return out;
  }
  const size_t past = below ? offset - (below->offset + below->bytes) : SIZE_MAX;
  const size_t before = above ? above->offset - offset : SIZE_MAX;
  if (below != nullptr && past <= before)
    return (past == 0 ? std::string("right") : "at " + std::to_string(past) + " bytes") +
           " after the end of " + array_name(*below);
  if (above != nullptr)
    return "at " + std::to_string(before) + " bytes before the start of " + array_name(*above);
  return "at byte " + std::to_string(offset) + " of the block's shared memory, in no array";
}

void* shared_static(SharedSlot& slot, size_t bytes, size_t align, const char* name,
                    const char* type) {
  Block* block = tls_block;
  if (block == nullptr || tls_thread == nullptr)
    throw Error(std::string("simt: __shared__ ") + name + " used outside an emulated kernel");
  return block->arena->static_array(&slot, bytes, align, name, type);
}

void* shared_dynamic(const char* name) {
  Block* block = tls_block;
  if (block == nullptr || tls_thread == nullptr)
    throw Error(std::string("simt: extern __shared__ ") + name +
                " used outside an emulated kernel");
  return block->arena->dynamic(name);
}

}  // namespace braid::simt
