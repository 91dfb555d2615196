// Device time in traces: timed events measure the device work between them, and while a trace
// records, every kernel of the table and every stream copy is a span on its stream's track, in
// the order the stream ran them, inside the trace's window.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "braid/core/device_trace.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "cuda_runtime.cuh"

namespace braid::testing {
namespace {

const Device kGpu = Device::cuda(0);

double host_ms(trace::Clock::time_point from, trace::Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

TEST(DeviceTime, TimedEventsMeasureTheWorkBetweenThem) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Stream compute = Stream::compute(kGpu);
  Tensor x = Tensor::empty({1 << 16}, DType::f32, kGpu),
         y = Tensor::empty({1 << 16}, DType::f32, kGpu);
  Event start(EventTiming::on), end(EventTiming::on);
  compute.synchronize();
  const auto before = trace::Clock::now();
  start.record(compute);
  ops::kernel<ops::FillKernel>(kGpu)(0.5f, x);
  ops::kernel<ops::GeluForwardKernel>(kGpu)(x, y);
  end.record(compute);
  const double device_ms = Event::elapsed_ms(start, end);  // waits for `end`
  const double wall_ms = host_ms(before, trace::Clock::now());
  EXPECT_GT(device_ms, 0.0);
  EXPECT_LE(device_ms, wall_ms) << "the device cannot have worked longer than the host waited";
  EXPECT_EQ(Event::elapsed_ms(start, start), 0.0);

  Event untimed;
  untimed.record(compute);
  EXPECT_THROW(Event::elapsed_ms(start, untimed), Error);
}

struct TrackSpan {
  std::string name;
  double ts = 0, dur = 0;
  nlohmann::json args;
};

// The complete spans of the trace at `path`, by track name.
std::map<std::string, std::vector<TrackSpan>> spans_by_track(const std::filesystem::path& path) {
  std::ifstream in(path);
  const nlohmann::json events = nlohmann::json::parse(in).at("traceEvents");
  std::map<int, std::string> track_names;
  for (const auto& e : events)
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      track_names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
  std::map<std::string, std::vector<TrackSpan>> tracks;
  for (const auto& e : events)
    if (e.at("ph") == "X")
      tracks[track_names.at(e.at("tid").get<int>())].push_back(
          {e.at("name").get<std::string>(), e.at("ts").get<double>(), e.at("dur").get<double>(),
           e.value("args", nlohmann::json::object())});
  return tracks;
}

TEST(DeviceTime, TracedKernelsAndCopiesAreSpansOfTheirStreamInRunOrder) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Stream compute = Stream::compute(kGpu);
  Tensor x = Tensor::empty({4096}, DType::f32, kGpu), y = Tensor::empty({4096}, DType::f32, kGpu);
  Tensor on_cpu = Tensor::empty({4096});
  std::vector<float> back(4096);
  {
    trace::DeviceSpan not_recording(compute, "kernel", "before the trace");
    EXPECT_FALSE(not_recording.active());
  }

  trace::start(0, "device spans");
  const auto traced_from = trace::Clock::now();
  ops::kernel<ops::FillKernel>(Device::cpu())(1.0f, on_cpu);  // the host's own: no device span
  ops::kernel<ops::FillKernel>(kGpu)(0.25f, x);
  ops::kernel<ops::GeluForwardKernel>(kGpu)(x, y);
  copy_async(back.data(), Device::cpu(), y.data_ptr(), kGpu, back.size() * sizeof(float), compute);
  ops::kernel<ops::AffineKernel>(kGpu)(y, 2.0f, 1.0f, x);
  trace::stop();  // waits for the spans' events
  const double window_us = host_ms(traced_from, trace::Clock::now()) * 1000;
  {
    trace::DeviceSpan after(compute, "kernel", "after the trace");
    EXPECT_FALSE(after.active());
  }

  const auto path = std::filesystem::temp_directory_path() /
                    ("braid_device_spans_" + std::to_string(::getpid()) + ".json");
  trace::write(path.string());
  const auto tracks = spans_by_track(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(tracks.contains("cuda:0 compute"));
  const std::vector<TrackSpan>& spans = tracks.at("cuda:0 compute");
  std::vector<std::string> names;
  for (const TrackSpan& s : spans) names.push_back(s.name);
  const std::vector<std::string> expected = {"fill", "gelu_forward", "copy device to host",
                                             "affine"};
  ASSERT_EQ(names, expected);
  EXPECT_EQ(spans[2].args.at("bytes").get<int64_t>(), 4096 * 4);
  // One stream runs one thing at a time, in issue order, and all of it before trace::stop
  // returned. (The anchor places device times at or before the true ones, by the time the
  // device takes to pass an event: the end bound holds exactly.)
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_GE(spans[i].dur, 0.0) << names[i];
    EXPECT_LE(spans[i].ts + spans[i].dur, window_us) << names[i];
    if (i > 0) EXPECT_LE(spans[i - 1].ts + spans[i - 1].dur, spans[i].ts + 1e-3) << names[i];
  }
  size_t fills = 0;
  for (const auto& [track, on_track] : tracks)
    for (const TrackSpan& s : on_track) fills += s.name == "fill";
  EXPECT_EQ(fills, 1u) << "the CPU's fill is not a device span";
}

TEST(DeviceTime, ASpanBegunInAnEarlierTraceIsDropped) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Stream compute = Stream::compute(kGpu);
  Tensor x = Tensor::empty({256}, DType::f32, kGpu);
  trace::start(0, "first");
  auto straddling = std::make_unique<trace::DeviceSpan>(compute, "kernel", "straddling");
  ops::kernel<ops::FillKernel>(kGpu)(1.0f, x);
  trace::stop();
  trace::start(0, "second");
  straddling.reset();  // ends while the second trace records, with no anchor of its own there
  EXPECT_NO_THROW(trace::stop());
  EXPECT_EQ(trace::event_count(), 0u);
}

}  // namespace
}  // namespace braid::testing
