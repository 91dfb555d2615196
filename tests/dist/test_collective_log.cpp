// The collective ring buffer and the BRAID_COLLECTIVE_TIMEOUT_S parsing (rank-local checks).
#include <cstdlib>
#include <optional>

#include "braid/dist/collective_log.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

// Sets an environment variable for one scope and restores the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CollectiveLog, KeepsTheLastSixtyFourInOrder) {
  CollectiveLog log;
  std::vector<uint64_t> tickets;
  for (int i = 1; i <= 70; ++i) {
    CollectiveRecord r;
    r.group = "g";
    r.op = "all_reduce";
    r.seq = i;
    r.numel = i;
    r.issued = std::chrono::system_clock::now();
    tickets.push_back(log.add(r));
  }
  log.mark_started(tickets[69]);
  log.mark_finished(tickets[69], CollectiveStatus::timed_out);
  // Ticket 1 was overwritten by record 65: its update must not touch record 65.
  log.mark_finished(tickets[0], CollectiveStatus::failed);
  const std::vector<CollectiveRecord> records = log.snapshot();
  ASSERT_EQ(records.size(), CollectiveLog::kCapacity);
  EXPECT_EQ(records.front().seq, 7);
  EXPECT_EQ(records.back().seq, 70);
  EXPECT_EQ(records.back().status, CollectiveStatus::timed_out);
  EXPECT_GE(records.back().duration_s, 0.0);
  EXPECT_EQ(records[58].seq, 65);
  EXPECT_EQ(records[58].status, CollectiveStatus::queued);
  const std::string text = log.format();
  EXPECT_NE(text.find("group 'g' all_reduce seq 70 f32[70]"), std::string::npos) << text;
  EXPECT_NE(text.find("timed out"), std::string::npos) << text;
}

// Traffic totals survive the ring's wrap-around and count whole buffers per (group, op).
TEST(CollectiveLog, CountsTrafficPerGroupAndOp) {
  CollectiveLog log;
  for (int i = 0; i < 100; ++i) {
    CollectiveRecord r;
    r.group = i % 2 ? "tp" : "dp";
    r.op = i % 4 < 2 ? "all_reduce" : "all_gather";
    r.dtype = i % 2 ? DType::f32 : DType::bf16;
    r.numel = 10;
    log.add(r);
  }
  const TrafficTable t = log.traffic();
  EXPECT_EQ(t.at("tp").at("all_reduce").calls, 25);
  EXPECT_EQ(t.at("tp").at("all_reduce").bytes, 25 * 40);
  EXPECT_EQ(t.at("dp").at("all_gather").bytes, 25 * 20);
  log.reset_traffic();
  EXPECT_TRUE(log.traffic().empty());
}

// The process-wide log sees what a real group issues: an all-reduce's tensor and an
// all-gather's whole output.
class GroupTraffic : public DistTest {};
TEST_F(GroupTraffic, RealCollectivesAreCounted) {
  collective_log().reset_traffic();
  Tensor t = Tensor::full({6}, 1.0f);
  world().all_reduce(t)->wait();
  world().all_reduce(t)->wait();
  Tensor gathered = Tensor::empty({3 * size()});
  world().all_gather(Tensor::full({3}, 2.0f), gathered)->wait();
  const TrafficTable traffic = collective_log().traffic();
  const auto& ops = traffic.at(world().name());
  EXPECT_EQ(ops.at("all_reduce").calls, 2);
  EXPECT_EQ(ops.at("all_reduce").bytes, 2 * 6 * 4);
  EXPECT_EQ(ops.at("all_gather").bytes, 3 * size() * 4);
}

TEST(CollectiveLog, EmptyLogSaysSo) {
  CollectiveLog log;
  EXPECT_NE(log.format().find("no collectives"), std::string::npos);
}

TEST(CollectiveTimeout, EnvironmentOverridesTheDefault) {
  {
    ScopedEnv env("BRAID_COLLECTIVE_TIMEOUT_S", "2.5");
    EXPECT_EQ(default_collective_timeout(), std::chrono::milliseconds(2500));
  }
  {
    ScopedEnv env("BRAID_COLLECTIVE_TIMEOUT_S", "");
    EXPECT_EQ(default_collective_timeout(), std::chrono::minutes(5));
  }
  for (const char* bad : {"abc", "-1", "0", "3s"}) {
    ScopedEnv env("BRAID_COLLECTIVE_TIMEOUT_S", bad);
    EXPECT_THROW(default_collective_timeout(), Error) << bad;
  }
}

}  // namespace
}  // namespace braid::dist::testing
