// The trace recorder and phase clocks: nothing is recorded while off, spans nest on their
// thread's track, named and asynchronous tracks, the JSON parses and merges, and the phase
// clocks exclude communication waits and count nested scopes once.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "braid/core/error.h"
#include "braid/core/trace.h"

namespace braid::trace {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() /
         (name + "_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".json");
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

TEST(Trace, RecordsNothingWhileOff) {
  start(0, "test");
  stop();
  const size_t before = event_count();
  {
    Span span("compute", "ignored");
    EXPECT_FALSE(span.active());
  }
  complete("ignored", "compute", Clock::now(), Clock::now());
  complete_on("track", "ignored", "compute", Clock::now(), Clock::now());
  EXPECT_EQ(event_count(), before);
  EXPECT_FALSE(enabled());
}

TEST(Trace, SpansNestOnTheirThreadAndTheJsonParses) {
  start(3, "rank 3 (tp=0/1)");
  name_this_thread("compute");
  {
    Span outer("step", "outer");
    ASSERT_TRUE(outer.active());
    outer.arg({"step", 7}).arg({"what", "text"});
    {
      Span inner("forward");
      inner.name("inner");
      sleep_ms(2);
    }
  }
  const auto t0 = Clock::now();
  complete_on("communication dp", "all_reduce", "collective", t0,
              t0 + std::chrono::microseconds(50), {{"bytes", int64_t{4096}}});
  async_span("recv", "p2p", 42, t0, t0 + std::chrono::microseconds(80));
  stop();
  EXPECT_EQ(event_count(), 5u);  // outer, inner, all_reduce, the async pair
  const fs::path path = temp_file("braid_trace");
  write(path.string());
  const nlohmann::json j = read_json(path);
  fs::remove(path);

  std::map<std::string, nlohmann::json> by_name;
  std::map<int, std::string> track_names;
  std::string process;
  int async_pairs = 0;
  for (const auto& e : j.at("traceEvents")) {
    EXPECT_EQ(e.at("pid"), 3);
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name") track_names[e.at("tid")] = e["args"]["name"];
    if (ph == "M" && e.at("name") == "process_name") process = e["args"]["name"];
    if (ph == "X") {
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_GE(e.at("ts").get<double>(), 0.0);
      by_name[e.at("name")] = e;
    }
    if (ph == "b" || ph == "e") {
      EXPECT_EQ(e.at("id"), 42);
      ++async_pairs;
    }
  }
  EXPECT_EQ(process, "rank 3 (tp=0/1)");
  EXPECT_EQ(async_pairs, 2);
  ASSERT_TRUE(by_name.count("outer") && by_name.count("inner") && by_name.count("all_reduce"));
  const auto& outer = by_name["outer"];
  const auto& inner = by_name["inner"];
  EXPECT_EQ(outer.at("tid"), inner.at("tid"));
  EXPECT_EQ(track_names[outer.at("tid")], "compute");
  EXPECT_LE(outer.at("ts").get<double>(), inner.at("ts").get<double>());
  EXPECT_GE(outer["ts"].get<double>() + outer["dur"].get<double>(),
            inner["ts"].get<double>() + inner["dur"].get<double>());
  EXPECT_GE(inner["dur"].get<double>(), 2000.0);  // slept 2 ms inside
  EXPECT_EQ(outer["args"]["step"], 7);
  EXPECT_EQ(outer["args"]["what"], "text");
  const auto& reduce = by_name["all_reduce"];
  EXPECT_NE(reduce.at("tid"), outer.at("tid"));
  EXPECT_EQ(track_names[reduce.at("tid")], "communication dp");
  EXPECT_EQ(reduce["args"]["bytes"], 4096);
  EXPECT_DOUBLE_EQ(reduce["dur"].get<double>(), 50.0);
}

TEST(Trace, SpansOfOtherThreadsGetTheirOwnTracks) {
  start(0, "test");
  name_this_thread("compute");
  { Span span("compute", "here"); }
  std::thread([] {
    name_this_thread("checkpoint write");
    Span span("checkpoint", "there");
  }).join();
  stop();
  const fs::path path = temp_file("braid_trace_threads");
  write(path.string());
  const nlohmann::json j = read_json(path);
  fs::remove(path);
  std::map<int, std::string> track_names;
  std::map<std::string, int> track_of;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      track_names[e.at("tid")] = e["args"]["name"];
    if (e.at("ph") == "X") track_of[e.at("name")] = e.at("tid");
  }
  ASSERT_EQ(track_of.size(), 2u);
  EXPECT_NE(track_of["here"], track_of["there"]);
  EXPECT_EQ(track_names[track_of["here"]], "compute");
  EXPECT_EQ(track_names[track_of["there"]], "checkpoint write");
}

TEST(Trace, MergeConcatenatesTheRanks) {
  std::vector<std::string> files;
  for (int rank = 0; rank < 2; ++rank) {
    start(rank, "rank " + std::to_string(rank));
    { Span span("compute", "work"); }
    stop();
    files.push_back(temp_file("braid_trace_rank" + std::to_string(rank)).string());
    write(files.back());
  }
  const fs::path merged = temp_file("braid_trace_merged");
  merge(files, merged.string());
  const nlohmann::json j = read_json(merged);
  std::set<int> pids_with_work, named;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "X") pids_with_work.insert(e.at("pid").get<int>());
    if (e.at("ph") == "M" && e.at("name") == "process_name") named.insert(e.at("pid").get<int>());
  }
  EXPECT_EQ(pids_with_work, (std::set<int>{0, 1}));
  EXPECT_EQ(named, (std::set<int>{0, 1}));
  for (const auto& f : files) fs::remove(f);
  fs::remove(merged);
  EXPECT_THROW(merge({"/nonexistent/braid_trace.json"}, merged.string()), Error);
}

// A phase's time leaves out the waits inside it, and those count as comm_wait.
TEST(PhaseClocks, ExcludeCommunicationWaitsAndCountNestedScopesOnce) {
  const double forward0 = phase_us(Phase::forward), wait0 = phase_us(Phase::comm_wait);
  const auto t0 = Clock::now();
  double waited_wall = 0;
  {
    const PhaseScope forward(Phase::forward);
    sleep_ms(5);
    {
      const PhaseScope again(Phase::forward);  // nested: not counted twice
      const auto w0 = Clock::now();
      {
        const PhaseScope wait(Phase::comm_wait);
        sleep_ms(10);
      }
      waited_wall = std::chrono::duration<double, std::micro>(Clock::now() - w0).count();
    }
  }
  const double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  const double forward = phase_us(Phase::forward) - forward0;
  const double wait = phase_us(Phase::comm_wait) - wait0;
  EXPECT_GE(wait, 10000.0);
  EXPECT_LE(wait, waited_wall);
  EXPECT_GE(forward, 5000.0);
  // Counted once and without the wait: forward + wait is the scope's wall time at most.
  EXPECT_LE(forward + wait, wall);
}

}  // namespace
}  // namespace braid::trace
