// Streams and events of the emulated runtime: handles and flags, stream order and run_on_stream,
// work in flight seen from another thread, event timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "runtime_test_util.h"
#include "simt/runtime_hooks.h"

namespace braid::simt {
namespace {

class StreamTest : public testing::RuntimeTest {};

TEST_F(StreamTest, CreateAndDestroy) {
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_NE(a, b);
  EXPECT_EQ(cudaStreamQuery(a), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamQuery(a), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
  EXPECT_EQ(cudaStreamCreateWithFlags(&a, 0x2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamCreate(nullptr), cudaErrorInvalidValue);
  // The special streams always exist and cannot be destroyed.
  for (cudaStream_t s : {cudaStream_t{nullptr}, cudaStreamLegacy, cudaStreamPerThread}) {
    EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  }
  int garbage = 0;
  EXPECT_EQ(cudaStreamQuery(reinterpret_cast<cudaStream_t>(&garbage)),
            cudaErrorInvalidResourceHandle);
}

TEST_F(StreamTest, RunOnStreamRunsInIssueOrderBeforeReturning) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    run_on_stream(stream, [&, i] { order.push_back(i); });
    EXPECT_EQ(order.size(), static_cast<size_t>(i + 1));
  }
  run_on_stream(nullptr, [&] { order.push_back(5); });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  // A launch into a dead stream: not run, and reported as the launch's error.
  bool ran = false;
  run_on_stream(stream, [&] { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(StreamTest, ExceptionsFromWorkPropagate) {
  EXPECT_THROW(run_on_stream(nullptr, [] { throw std::runtime_error("fault"); }),
               std::runtime_error);
  bool ran = false;
  run_on_stream(nullptr, [&] { ran = true; });  // the device is usable again
  EXPECT_TRUE(ran);
}

// Work another thread is running is in flight: queries say so, synchronisation waits for it.
TEST_F(StreamTest, WorkInFlightOnAnotherThread) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  std::promise<void> started, release;
  std::atomic<bool> finished{false};
  std::thread worker([&] {
    run_on_stream(stream, [&] {
      started.set_value();
      release.get_future().wait();
      finished = true;
    });
  });
  started.get_future().wait();
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotReady);  // CUDA records "not ready" too
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.set_value();
  });
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(finished);
  worker.join();
  releaser.join();
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(StreamTest, EventFlagsAndHandles) {
  cudaEvent_t e = nullptr;
  EXPECT_EQ(cudaEventCreate(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventCreateWithFlags(&e, 0x8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventInterprocess), cudaErrorInvalidValue);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming),
            cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);  // never recorded: complete
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(e, nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(nullptr), cudaErrorInvalidResourceHandle);
}

TEST_F(StreamTest, StreamWaitEvent) {
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0), cudaSuccess);  // never recorded: nothing to wait for
  ASSERT_EQ(cudaEventRecord(e, nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, e), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0x4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamWaitEvent(s, nullptr, 0), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(StreamTest, ElapsedTimeBetweenRecords) {
  cudaEvent_t start = nullptr, end = nullptr, untimed = nullptr, fresh = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&fresh), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // unrecorded
  ASSERT_EQ(cudaEventRecord(start), cudaSuccess);
  // Work on the stream between the records is what the events time.
  run_on_stream(nullptr, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  ASSERT_EQ(cudaEventRecord(end), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 30.0f);
  EXPECT_LT(ms, 10000.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, fresh, end), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(nullptr, start, end), cudaErrorInvalidValue);
  for (cudaEvent_t e : {start, end, untimed, fresh}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);
}

TEST_F(StreamTest, DeviceSynchronizeWaitsForOtherThreads) {
  std::promise<void> started;
  std::atomic<bool> finished{false};
  std::thread worker([&] {
    run_on_stream(nullptr, [&] {
      started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      finished = true;
    });
  });
  started.get_future().wait();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(finished);
  worker.join();
}

}  // namespace
}  // namespace braid::simt
