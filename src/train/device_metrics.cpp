// DeviceMetrics: step records in device rings, copied to pinned host memory on the copy stream.
#include "braid/train/device_metrics.h"

#include <cstring>

#include "braid/core/error.h"
#include "braid/ops/kernel_signatures.h"

namespace braid::train {

DeviceMetrics::DeviceMetrics(Device device, int64_t capacity)
    : device_(device), capacity_(capacity) {
  BRAID_CHECK(capacity > 0, "DeviceMetrics needs a capacity > 0, got {}", capacity);
  state_ = Tensor::zeros({ops::kStepState}, DType::f32, device);
  for (Ring& r : rings_) {
    r.rows = Tensor::zeros({capacity, ops::kStepRecord}, DType::f32, device);
    r.host = pinned_empty({capacity * ops::kStepRecord + ops::kStepState}, DType::f32, device);
  }
}

DeviceMetrics::~DeviceMetrics() {
  for (Ring& r : rings_) r.copied.synchronize();
}

Tensor DeviceMetrics::record_for(int64_t step) {
  if (rings_[current_].count == capacity_) readback();
  Ring& r = rings_[current_];
  if (r.count == 0) {
    r.first_step = step;
    // Written again only once its last copy has finished (a wait on the device).
    Stream::compute(device_).wait(r.copied);
  }
  BRAID_CHECK(step == r.first_step + r.count, "DeviceMetrics: step {} recorded after step {}", step,
              r.first_step + r.count - 1);
  return r.rows.alias({ops::kStepRecord}, {1}, r.count++ * ops::kStepRecord);
}

void DeviceMetrics::readback() {
  Ring& r = rings_[current_];
  if (r.count == 0) return;
  Ring& other = rings_[1 - current_];
  // Its pinned rows must be read before this switch lets them be overwritten: kept for the
  // next collect() (a wait only when readbacks come faster than the device).
  if (other.in_flight) {
    early_.push_back(take(other));
    oldest_in_flight_ = -1;
  }
  const Stream copy = Stream::copy(device_);
  issued_.record(Stream::compute(device_));
  copy.wait(issued_);
  char* host = static_cast<char*>(r.host.data_ptr());
  const size_t row_bytes = sizeof(float) * r.count * ops::kStepRecord;
  copy_async(host, Device::cpu(), r.rows.data_ptr(), device_, row_bytes, copy);
  copy_async(host + sizeof(float) * capacity_ * ops::kStepRecord, Device::cpu(), state_.data_ptr(),
             device_, sizeof(float) * ops::kStepState, copy);
  r.copied.record(copy);
  r.in_flight = true;
  if (oldest_in_flight_ < 0) oldest_in_flight_ = current_;
  current_ = 1 - current_;
}

DeviceReadback DeviceMetrics::take(Ring& r) {
  r.copied.synchronize();
  const float* host = r.host.data<float>();
  DeviceReadback out;
  for (int64_t i = 0; i < r.count; ++i) {
    const float* row = host + i * ops::kStepRecord;
    out.steps.push_back({r.first_step + i, row[ops::kRecordLoss], row[ops::kRecordNorm],
                         row[ops::kRecordScale], row[ops::kRecordSkip] != 0.0f});
  }
  const float* state = host + capacity_ * ops::kStepRecord;
  out.skipped_total = static_cast<int64_t>(state[ops::kStateSkipped]);
  out.first_nonfinite = static_cast<int64_t>(state[ops::kStateFirstNonFinite]);
  r.in_flight = false;
  r.count = 0;
  return out;
}

std::vector<DeviceReadback> DeviceMetrics::collect(bool wait) {
  std::vector<DeviceReadback> out = std::move(early_);
  early_.clear();
  while (oldest_in_flight_ >= 0) {
    Ring& r = rings_[oldest_in_flight_];
    if (!wait && !r.copied.done()) break;
    out.push_back(take(r));
    const int younger = 1 - oldest_in_flight_;
    oldest_in_flight_ = rings_[younger].in_flight ? younger : -1;
  }
  return out;
}

}  // namespace braid::train
