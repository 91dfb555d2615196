// Streams and events in core: the CPU's immediate behaviour, the dispatch to a device backend's
// StreamOps (a recording stand-in registered for the cuda kind), record_stream's path to the
// device allocator, and device_memory_stats on the CPU.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "braid/core/allocator.h"
#include "braid/core/storage.h"
#include "braid/core/stream.h"
#include "braid/core/tensor.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

TEST(Stream, OnTheCpuEverythingIsImmediate) {
  const Stream cpu;
  EXPECT_TRUE(cpu.device().is_cpu());
  EXPECT_EQ(cpu.native(), nullptr);
  EXPECT_TRUE(cpu.done());
  cpu.synchronize();
  EXPECT_EQ(Stream::copy(Device::cpu()).native(), nullptr);
  Event e;
  e.record(cpu);
  EXPECT_TRUE(e.done());
  EXPECT_EQ(e.native(), nullptr);
  Stream::comm(Device::cpu()).wait(e);
  e.synchronize();
  std::vector<int32_t> src{1, 2, 3, 4}, dst(4, 0);
  copy_async(dst.data(), Device::cpu(), src.data(), Device::cpu(), 16, cpu);
  EXPECT_EQ(dst, src);
  Tensor t = Tensor::empty({4});
  record_stream(*t.storage(), cpu);  // host memory: nothing to track
  EXPECT_STREQ(stream_role_name(StreamRole::copy), "copy");
}

TEST(Stream, DeviceStreamsNeedARegisteredBackend) {
  StreamOps saved;
  try {
    saved = stream_ops(DeviceKind::cuda);
  } catch (const Error&) {
  }
  register_stream_ops(DeviceKind::cuda, StreamOps{});
  EXPECT_ERROR_CONTAINS(Stream::compute(Device::cuda(0)), "no stream backend for cuda:0");
  register_stream_ops(DeviceKind::cuda, saved);
}

// Every call the stand-in backend received, as text.
std::vector<std::string> g_calls;
void* handle(uintptr_t value) {
  return reinterpret_cast<void*>(value);
}

StreamOps recording_ops() {
  StreamOps ops;
  ops.get = [](int device, StreamRole role) {
    return handle(0x1000 + 0x10 * static_cast<uintptr_t>(device) + static_cast<uintptr_t>(role));
  };
  ops.synchronize = [](void* s, int d) { g_calls.push_back(fmt::format("sync {} {}", s, d)); };
  ops.done = [](void*, int) { return false; };
  ops.create_event = [](int d, EventTiming timing) {
    g_calls.push_back(fmt::format("create {}{}", d, timing == EventTiming::on ? " timed" : ""));
    return handle(0x9000 + static_cast<uintptr_t>(d));
  };
  ops.destroy_event = [](void* e, int d) { g_calls.push_back(fmt::format("destroy {} {}", e, d)); };
  ops.record = [](void* e, void* s, int d) {
    g_calls.push_back(fmt::format("record {} on {} {}", e, s, d));
  };
  ops.wait = [](void* s, int d, void* e) {
    g_calls.push_back(fmt::format("wait {} {} for {}", s, d, e));
  };
  ops.event_done = [](void*, int) { return false; };
  ops.event_synchronize = [](void* e, int d) {
    g_calls.push_back(fmt::format("event sync {} {}", e, d));
  };
  ops.elapsed_ms = [](void* start, void* end, int d) {
    g_calls.push_back(fmt::format("elapsed {} to {} on {}", start, end, d));
    return 2.5f;
  };
  ops.copy = [](void* dst, Device dd, const void* src, Device sd, size_t bytes, void* s, int d) {
    g_calls.push_back(fmt::format("copy {} {}->{} on {} {}", bytes, sd.str(), dd.str(), s, d));
  };
  return ops;
}

class StreamDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      saved_ = stream_ops(DeviceKind::cuda);
    } catch (const Error&) {
    }
    register_stream_ops(DeviceKind::cuda, recording_ops());
    g_calls.clear();
  }
  void TearDown() override { register_stream_ops(DeviceKind::cuda, saved_); }
  StreamOps saved_;
};

TEST_F(StreamDispatch, StreamsAndEventsReachTheBackendWithTheirHandles) {
  const Stream compute = Stream::compute(Device::cuda(1));
  const Stream copy = Stream::copy(Device::cuda(1));
  EXPECT_EQ(compute.native(), handle(0x1010));
  EXPECT_EQ(copy.native(), handle(0x1011));
  EXPECT_EQ(Stream::comm(Device::cuda(2)).native(), handle(0x1022));
  EXPECT_FALSE(compute == copy);
  EXPECT_TRUE(copy == Stream::copy(Device::cuda(1)));
  EXPECT_FALSE(compute.done());
  {
    Event e;
    e.record(compute);
    copy.wait(e);
    EXPECT_FALSE(e.done());
    e.record(compute);                           // same device: the same event, recorded again
    e.record(Stream::compute(Device::cuda(2)));  // another device: a new event
    Event moved = std::move(e);
    Stream().wait(moved);  // the CPU stream: the host waits
    copy.synchronize();
  }  // `moved` is destroyed once, `e` not at all
  const std::vector<std::string> expected = {
      "create 1",
      "record 0x9001 on 0x1010 1",
      "wait 0x1011 1 for 0x9001",
      "record 0x9001 on 0x1010 1",
      "destroy 0x9001 1",
      "create 2",
      "record 0x9002 on 0x1020 2",
      "event sync 0x9002 2",
      "sync 0x1011 1",
      "destroy 0x9002 2",
  };
  EXPECT_EQ(g_calls, expected);
}

TEST_F(StreamDispatch, ElapsedTimeNeedsTimedEventsRecordedOnOneDevice) {
  const Stream compute = Stream::compute(Device::cuda(1));
  Event start(EventTiming::on), end(EventTiming::on);
  EXPECT_ERROR_CONTAINS(Event::elapsed_ms(start, end), "the start event was never recorded");
  start.record(compute);
  EXPECT_ERROR_CONTAINS(Event::elapsed_ms(start, end), "the end event was never recorded");
  end.record(compute);
  g_calls.clear();
  EXPECT_EQ(Event::elapsed_ms(start, end), 2.5);
  // The end event is waited for first: the backend's elapsed time needs both finished.
  const std::vector<std::string> expected = {"event sync 0x9001 1",
                                             "elapsed 0x9001 to 0x9001 on 1"};
  EXPECT_EQ(g_calls, expected);

  Event untimed;
  untimed.record(compute);
  EXPECT_ERROR_CONTAINS(Event::elapsed_ms(start, untimed),
                        "the end event was made without timing; construct it as "
                        "Event(EventTiming::on)");
  Event elsewhere(EventTiming::on);
  elsewhere.record(Stream::compute(Device::cuda(2)));
  EXPECT_ERROR_CONTAINS(Event::elapsed_ms(start, elsewhere),
                        "recorded on cuda:1 and cuda:2; times compare only on one device");
  Event on_cpu(EventTiming::on);
  on_cpu.record(Stream());
  EXPECT_ERROR_CONTAINS(Event::elapsed_ms(on_cpu, end), "the start event was never recorded");
  EXPECT_EQ(start.timing(), EventTiming::on);
  EXPECT_EQ(untimed.timing(), EventTiming::off);
}

TEST_F(StreamDispatch, CopyAsyncRunsOnTheGivenStream) {
  std::vector<float> host(4);
  const Stream copy = Stream::copy(Device::cuda(0));
  copy_async(handle(0x5000), Device::cuda(0), host.data(), Device::cpu(), 16, copy);
  ASSERT_EQ(g_calls.size(), 1u);
  EXPECT_EQ(g_calls[0], "copy 16 cpu->cuda:0 on 0x1001 0");
  EXPECT_ERROR_CONTAINS(copy_async(handle(0x5000), Device::cuda(0), host.data(), Device::cpu(), 16,
                                   Stream::copy(Device::cuda(1))),
                        "must belong to a device of the copy");
  EXPECT_ERROR_CONTAINS(copy_async(host.data(), Device::cpu(), host.data(), Device::cpu(), 16,
                                   Stream::copy(Device::cuda(1))),
                        "host-to-host copy on cuda:1's copy stream");
}

// record_stream hands the storage's start and the stream's handle to the device allocator.
std::vector<std::string> g_recorded;

TEST_F(StreamDispatch, RecordStreamReachesTheDeviceAllocator) {
  DeviceMemoryOps saved;
  try {
    saved = device_memory(DeviceKind::cuda);
  } catch (const Error&) {
  }
  DeviceMemoryOps ops;
  ops.allocate = [](size_t, int) { return handle(0x7000); };
  ops.release = [](void*, int) {};
  ops.record_stream = [](void* p, int d, void* s) {
    g_recorded.push_back(fmt::format("{} {} {}", p, d, s));
  };
  register_device_memory(DeviceKind::cuda, ops);
  {
    Storage storage(64, Device::cuda(0));
    record_stream(storage, Stream::comm(Device::cuda(0)));
    EXPECT_ERROR_CONTAINS(record_stream(storage, Stream::copy(Device::cuda(1))),
                          "memory on cuda:0 used on cuda:1's copy stream");
  }
  register_device_memory(DeviceKind::cuda, saved);
  EXPECT_EQ(g_recorded, (std::vector<std::string>{"0x7000 0 0x1002"}));
}

TEST(DeviceMemoryStats, OnTheCpuTheyAreTheHostAllocatorsCounters) {
  const Tensor t = Tensor::empty({1 << 16});
  const MemoryStats host = host_memory_stats();
  const DeviceMemoryStats s = device_memory_stats(Device::cpu());
  EXPECT_EQ(s.allocated_bytes, host.current_bytes);
  EXPECT_EQ(s.reserved_bytes, host.current_bytes);
  EXPECT_EQ(s.peak_allocated_bytes, host.peak_bytes);
  EXPECT_EQ(s.device_mallocs, host.allocations);
  EXPECT_GE(s.allocated_bytes, int64_t{1} << 18);
  empty_device_cache(Device::cpu());  // a no-op
  reset_device_peak(Device::cpu());
  EXPECT_EQ(device_memory_stats(Device::cpu()).peak_allocated_bytes,
            host_memory_stats().current_bytes);
}

}  // namespace
}  // namespace braid::testing
