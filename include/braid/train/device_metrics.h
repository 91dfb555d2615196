// The device step's scalars (loss, gradient norm, clip scale, skip flag per step; the run's
// skip count and first non-finite step), kept on the device and read back without stalling it.
//
// Each step's verdict (StepVerdictKernel) writes one row of a device ring. readback() issues a
// copy of the rows written since the last one (and of the state) into pinned host memory, on the
// copy stream after an event on the compute stream, and returns at once; collect() hands over
// the copies that have arrived (or waits for them). Two rings alternate, so the compute stream
// writes one while the other is being copied; it waits (on the device) for a ring's copy before
// writing that ring again.
#pragma once

#include <array>
#include <vector>

#include "braid/core/pinned_memory.h"
#include "braid/core/stream.h"
#include "braid/core/tensor.h"

namespace braid::train {

struct StepRecord {
  int64_t step = 0;  // 0-based
  float loss = 0, norm = 0, scale = 1;
  bool skipped = false;
};

struct DeviceReadback {
  std::vector<StepRecord> steps;  // in step order
  int64_t skipped_total = 0;      // steps skipped on the device so far
  int64_t first_nonfinite = 0;    // 1-based step of the first non-finite one; 0: none
};

class DeviceMetrics {
 public:
  // Rings of `capacity` steps each (the steps between two readbacks; more start a readback).
  DeviceMetrics(Device device, int64_t capacity);
  ~DeviceMetrics();
  DeviceMetrics(const DeviceMetrics&) = delete;
  DeviceMetrics& operator=(const DeviceMetrics&) = delete;

  // The run's state (f32[kStepState] on the device), zero at first.
  Tensor& state() { return state_; }
  // The row (f32[kStepRecord] on the device) for `step`'s record; steps come in order.
  Tensor record_for(int64_t step);
  // Issues the copy of the rows recorded since the last readback; no-op when there are none.
  // Returns at once, unless the readback before the last one has not been collected: that one
  // is then waited for and kept for collect().
  void readback();
  // The readbacks whose copies have finished, oldest first; with `wait`, all of them (blocks
  // until the device has finished the steps they hold).
  std::vector<DeviceReadback> collect(bool wait);

 private:
  struct Ring {
    Tensor rows;  // f32 [capacity, kStepRecord] on the device
    Tensor host;  // pinned f32: the rows, then the state
    Event copied;
    int64_t first_step = 0, count = 0;
    bool in_flight = false;
  };
  DeviceReadback take(Ring& ring);

  Device device_;
  int64_t capacity_;
  Tensor state_;
  std::array<Ring, 2> rings_;
  int current_ = 0;
  int oldest_in_flight_ = -1;
  std::vector<DeviceReadback> early_;  // taken by readback() for the next collect()
  Event issued_;
};

}  // namespace braid::train
