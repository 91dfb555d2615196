// DeviceBatches: host batches checked, pinned and copied to the device on its copy stream.
#include "braid/train/device_batches.h"

#include <cstring>

#include "braid/core/error.h"
#include "braid/core/storage.h"
#include "braid/ops/host_checked.h"

namespace braid::train {

void check_host_batch(const data::Batch& batch, int64_t vocab_size) {
  const Tensor& in = batch.inputs;
  const Tensor& tg = batch.targets;
  BRAID_CHECK(in.defined() && tg.defined() && in.device().is_cpu() && tg.device().is_cpu(),
              "a training batch must be two host tensors");
  BRAID_CHECK(in.dtype() == DType::i32 && in.dim() == 2 && tg.dtype() == DType::i32 &&
                  tg.shape() == in.shape(),
              "a training batch needs i32 [B, T] inputs and targets of one shape, got {} and {}",
              in.str(), tg.str());
  const Tensor ids = in.contiguous(), targets = tg.contiguous();
  const int32_t* id = ids.data<int32_t>();
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    BRAID_CHECK(id[i] >= 0 && id[i] < vocab_size,
                "token id {} at position {} is outside the vocabulary [0, {})", id[i], i,
                vocab_size);
    BRAID_CHECK(t[i] >= -1 && t[i] < vocab_size,
                "target {} at position {} is outside the vocabulary [0, {}) and not -1 (ignored)",
                t[i], i, vocab_size);
  }
}

DeviceBatches::DeviceBatches(Device device, int64_t vocab_size)
    : device_(device), vocab_size_(vocab_size) {
  BRAID_CHECK(!device.is_cpu(), "DeviceBatches stages batches for a device, not the CPU");
}

DeviceBatches::~DeviceBatches() {
  // The pinned buffers must outlive the copies out of them.
  for (Slot& s : slots_) s.copied.synchronize();
}

data::Batch DeviceBatches::stage(const data::Batch& host) {
  check_host_batch(host, vocab_size_);
  const Tensor ids = host.inputs.contiguous(), targets = host.targets.contiguous();
  const size_t bytes = ids.nbytes();
  Slot& slot = slots_[next_slot_];
  next_slot_ = 1 - next_slot_;
  // Its last copy was issued two batches ago and has long finished; this only makes it certain.
  slot.copied.synchronize();
  if (!slot.host.defined() || slot.host.numel() < 2 * ids.numel())
    slot.host = pinned_empty({2 * ids.numel()}, DType::i32, device_);
  char* pinned = static_cast<char*>(slot.host.data_ptr());
  std::memcpy(pinned, ids.data_ptr(), bytes);
  std::memcpy(pinned + bytes, targets.data_ptr(), bytes);
  // Device memory comes from the compute stream's pool: the copy stream writes it only after
  // the compute work issued so far, which may still be using the memory's previous owner.
  data::Batch out{Tensor::empty(ids.shape(), DType::i32, device_),
                  Tensor::empty(ids.shape(), DType::i32, device_)};
  const Stream copy = Stream::copy(device_);
  allocated_.record(Stream::compute(device_));
  copy.wait(allocated_);
  copy_async(out.inputs.data_ptr(), device_, pinned, Device::cpu(), bytes, copy);
  copy_async(out.targets.data_ptr(), device_, pinned + bytes, Device::cpu(), bytes, copy);
  slot.copied.record(copy);
  record_stream(*out.inputs.storage(), copy);
  record_stream(*out.targets.storage(), copy);
  staged_copied_ = &slot.copied;
  // What the ops on the device would otherwise read back to check (and count) every step.
  ops::mark_host_checked(out.inputs, ops::host_check(ids));
  ops::mark_host_checked(out.targets, ops::host_check(targets));
  return out;
}

data::Batch DeviceBatches::next(const std::function<data::Batch()>& source,
                                const std::function<void()>& before_source) {
  auto pull = [&] {
    if (before_source) before_source();
    return source();
  };
  if (!staged_) staged_ = stage(pull());
  data::Batch out = std::move(*staged_);
  staged_.reset();
  Stream::compute(device_).wait(*staged_copied_);
  staged_ = stage(pull());
  return out;
}

}  // namespace braid::train
