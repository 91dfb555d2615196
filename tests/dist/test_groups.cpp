// Sub-groups, many outstanding operations, in-order completion, input validation, and timeouts
// that name the ranks that never joined.
#include <chrono>
#include <thread>

#include "braid/core/storage.h"
#include "braid/dist/collective_log.h"
#include "braid/dist/mpi_process_group.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

std::vector<int> ranks_with_parity(int size, int parity) {
  std::vector<int> out;
  for (int r = parity; r < size; r += 2) out.push_back(r);
  return out;
}

// The sum of (r+1) over the world ranks `members`.
double sum_of_rank_plus_one(const std::vector<int>& members) {
  double s = 0;
  for (int r : members) s += r + 1;
  return s;
}

TEST_F(DistTest, SplitEvenAndOdd) {
  auto even = world().split(ranks_with_parity(size(), 0), "even");
  auto odd = world().split(ranks_with_parity(size(), 1), "odd");
  const bool is_even = rank() % 2 == 0;
  EXPECT_EQ(even != nullptr, is_even);
  EXPECT_EQ(odd != nullptr, !is_even);
  ProcessGroupPtr mine = is_even ? even : odd;
  const std::vector<int> members = ranks_with_parity(size(), rank() % 2);
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->name(), is_even ? "even" : "odd");
  EXPECT_EQ(mine->size(), static_cast<int>(members.size()));
  EXPECT_EQ(mine->rank(), rank() / 2);
  EXPECT_EQ(mine->world_ranks(), members);
  Tensor t = Tensor::full({6}, static_cast<float>(rank() + 1));
  mine->all_reduce(t)->wait();
  for (float v : t.to_vector()) EXPECT_EQ(v, sum_of_rank_plus_one(members));
}

TEST_F(DistTest, SplitOrdersMembersAsListed) {
  std::vector<int> reversed;
  for (int r = size() - 1; r >= 0; --r) reversed.push_back(r);
  auto group = world().split(reversed, "reversed");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->rank(), size() - 1 - rank());
  EXPECT_EQ(group->world_ranks(), reversed);
  // Broadcast from group rank 0, which is the last world rank.
  Tensor t = Tensor::full({2}, static_cast<float>(rank()));
  group->broadcast(t, 0)->wait();
  EXPECT_EQ(t.to_vector()[1], size() - 1);
}

TEST_F(DistTest, SplitOfOneRankAndOfNone) {
  auto solo = world().split({0}, "solo");
  EXPECT_EQ(solo != nullptr, rank() == 0);
  if (solo) {
    EXPECT_EQ(solo->size(), 1);
    Tensor t = Tensor::full({3}, 5.0f);
    solo->all_reduce(t)->wait();
    EXPECT_EQ(t.to_vector()[0], 5.0f);
  }
  EXPECT_EQ(world().split({}, "nobody"), nullptr);
}

TEST_F(DistTest, SplitOfASplit) {
  std::vector<int> all;
  for (int r = 0; r < size(); ++r) all.push_back(r);
  auto copy = world().split(all, "copy");
  ASSERT_NE(copy, nullptr);
  auto first = copy->split({0}, "first-of-copy");
  EXPECT_EQ(first != nullptr, rank() == 0);
}

TEST_F(DistTest, TensorUsedInTwoGroups) {
  auto parity = world().split(ranks_with_parity(size(), rank() % 2 == 0 ? 0 : 1), "parity-a");
  auto other = world().split(ranks_with_parity(size(), rank() % 2 == 0 ? 1 : 0), "parity-b");
  // Each rank belongs to exactly one of the two calls' results.
  ProcessGroupPtr mine = parity ? parity : other;
  ASSERT_NE(mine, nullptr);
  const double world_sum = size() * (size() + 1) / 2.0;

  Tensor t = Tensor::full({5}, static_cast<float>(rank() + 1));
  world().all_reduce(t)->wait();
  mine->all_reduce(t)->wait();
  for (float v : t.to_vector()) EXPECT_EQ(v, world_sum * mine->size());

  // Two groups working at once on different tensors: two progress threads inside MPI.
  Tensor a = Tensor::full({1000}, 1.0f), b = Tensor::full({1000}, 2.0f);
  WorkPtr wa = world().all_reduce(a);
  WorkPtr wb = mine->all_reduce(b);
  wb->wait();
  wa->wait();
  EXPECT_EQ(a.to_vector()[999], size());
  EXPECT_EQ(b.to_vector()[999], 2.0f * mine->size());
}

// Completion is in issue order: reading the flags from last to first, a completed later
// operation implies that every earlier one reads as completed too.
TEST_F(DistTest, FiftyOutstandingAllReducesCompleteInOrder) {
  constexpr int kCount = 50;
  std::vector<Tensor> tensors;
  std::vector<WorkPtr> works;
  for (int i = 0; i < kCount; ++i) {
    tensors.push_back(Tensor::full({37}, static_cast<float>((rank() + 1) * (i + 1))));
    works.push_back(world().all_reduce(tensors.back()));
  }
  bool all_done = false;
  while (!all_done) {
    bool later_done = false;
    all_done = true;
    for (int i = kCount - 1; i >= 0; --i) {
      const bool done = works[i]->is_completed();
      ASSERT_FALSE(later_done && !done) << "operation " << i << " not completed after a later one";
      later_done |= done;
      all_done &= done;
    }
    std::this_thread::yield();  // ranks share cores in CI; let the progress threads run
  }
  const double ranks_sum = size() * (size() + 1) / 2.0;
  for (int i = 0; i < kCount; ++i) {
    works[i]->wait();
    EXPECT_EQ(tensors[i].to_vector()[36], ranks_sum * (i + 1)) << "all_reduce " << i;
  }
}

TEST_F(DistTest, MixedCollectivesAndPointToPointInFlight) {
  const int n = size(), next = (rank() + 1) % n, prev = (rank() + n - 1) % n;
  Tensor out = Tensor::full({4096}, static_cast<float>(rank())), in = Tensor::zeros({4096});
  Tensor sum = Tensor::full({8}, 1.0f);
  WorkPtr s = world().send(out, next, 11);
  WorkPtr ar = world().all_reduce(sum);
  WorkPtr r = world().recv(in, prev, 11);
  ar->wait();
  r->wait();
  s->wait();
  EXPECT_EQ(sum.to_vector()[0], n);
  EXPECT_EQ(in.to_vector()[4095], prev);
}

// A receive completes as soon as its data is there, even while a receive posted before it is
// still open (a pipeline waits for the activation it needs now, not for one posted for later).
// After a caller ran an all_reduce itself by waiting at once, the next one of the same size is
// queued without waking the progress thread (MpiProcessGroup's issue()). If nobody waits for
// it, it must still start and finish on its own: the control thread wakes the progress thread
// within a few ms. Each rank only polls is_completed(), so a missing start would leave it
// incomplete until the deadline.
TEST_F(DistTest, AnOperationNobodyWaitsForStillCompletes) {
  for (int round = 0; round < 3; ++round) {
    Tensor first = Tensor::full({4096}, 1.0f);
    world().all_reduce(first)->wait();  // run by this thread: the pattern is "waited at once"
    Tensor second = Tensor::full({4096}, static_cast<float>(rank() + 1));
    WorkPtr w = world().all_reduce(second);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!w->is_completed() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_TRUE(w->is_completed()) << "round " << round;
    EXPECT_EQ(second.data<float>()[4095], size() * (size() + 1) / 2.0f);
  }
}

TEST_F(DistTest, PointToPointCompletesOutOfIssueOrder) {
  const int n = size(), next = (rank() + 1) % n, prev = (rank() + n - 1) % n;
  Tensor later = Tensor::zeros({16}), now = Tensor::zeros({16});
  WorkPtr r_later = world().recv(later, prev, 21);
  WorkPtr r_now = world().recv(now, prev, 22);
  Tensor payload = Tensor::full({16}, static_cast<float>(rank()));
  WorkPtr s_now = world().send(payload, next, 22);
  // Under issue-order completion this would wait for tag 21, which every rank sends only
  // below: a deadlock around the ring (the collective timeout would report it).
  r_now->wait();
  EXPECT_EQ(now.to_vector()[0], prev);
  WorkPtr s_later = world().send(payload, next, 21);
  r_later->wait();
  EXPECT_EQ(later.to_vector()[15], prev);
  s_now->wait();
  s_later->wait();
}

TEST_F(DistTest, InvalidInputsThrowAtIssue) {
  // A tensor claiming to live on a GPU (host memory underneath, never touched).
  auto fake = std::make_shared<Storage>(new float[4], 16, Device::cuda(0),
                                        [](void* p) { delete[] static_cast<float*>(p); });
  Tensor gpu = Tensor::from_storage(fake, {4}, DType::f32);
  try {
    world().all_reduce(gpu);
    ADD_FAILURE() << "a CUDA tensor must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL"), std::string::npos) << e.what();
  }

  Tensor square = Tensor::zeros({4, 4});
  Tensor strided = square.alias({4, 4}, {1, 4}, 0);  // a transpose: not dense row-major
  try {
    world().all_reduce(strided);
    ADD_FAILURE() << "a non-contiguous tensor must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not contiguous"), std::string::npos) << e.what();
  }

  Tensor in = Tensor::zeros({10}), wrong = Tensor::zeros({chunk_size(10, size(), rank()) + 1});
  EXPECT_THROW(world().reduce_scatter(in, wrong), Error);
  EXPECT_THROW(world().all_gather(wrong, in), Error);
  Tensor ints = Tensor::zeros({10}, DType::i32);
  Tensor chunk = Tensor::zeros({chunk_size(10, size(), rank())});
  EXPECT_THROW(world().reduce_scatter(ints, chunk), Error);
  EXPECT_THROW(world().broadcast(in, size()), Error);
  EXPECT_THROW(world().send(in, -1), Error);
  EXPECT_THROW(world().recv(in, 0, -3), Error);
  EXPECT_THROW(world().split({size()}, "outside"), Error);
}

TEST_F(DistTest, TimeoutFromEnvironmentIsTheDefault) {
  EXPECT_EQ(world().timeout(), default_collective_timeout());
}

// Rank 0 enters an all_reduce the others never issue: after the group's 1 s timeout its
// wait() must throw, naming the op, the sequence number and every other rank. The others sit
// in a world barrier meanwhile, i.e. inside another blocking MPI call, and must still answer.
TEST_F(DistTest, TimeoutNamesTheRanksThatNeverJoined) {
  if (size() < 2) GTEST_SKIP() << "needs a peer that does not join";
  std::vector<int> all;
  for (int r = 0; r < size(); ++r) all.push_back(r);
  ProcessGroupPtr late = world().split(all, "late");
  ASSERT_NE(late, nullptr);
  late->set_timeout(std::chrono::seconds(1));
  Tensor t = Tensor::full({4}, 1.0f);
  if (rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    WorkPtr w = late->all_reduce(t);
    std::string message;
    try {
      w->wait();
    } catch (const Error& e) {
      message = e.what();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(message.find("group 'late'"), std::string::npos) << message;
    EXPECT_NE(message.find("all_reduce seq 1"), std::string::npos) << message;
    for (int r = 1; r < size(); ++r)
      EXPECT_NE(message.find(fmt::format("rank {} [last issued seq 0, started seq 0]", r)),
                std::string::npos)
          << message;
    EXPECT_NE(message.find("not responding: none"), std::string::npos) << message;
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 4.0);  // timeout + a prompt answer from every peer
    EXPECT_TRUE(w->is_completed());
    EXPECT_NE(w->error(), nullptr);
    // The failed group stays failed.
    EXPECT_THROW(late->barrier()->wait(), Error);
    bool logged = false;
    for (const CollectiveRecord& r : collective_log().snapshot())
      logged |= r.group == "late" && r.status == CollectiveStatus::timed_out && r.seq == 1;
    EXPECT_TRUE(logged) << collective_log().format();
  }
  world().barrier()->wait();
}

// all_reduce, reduce_scatter and all_gather run as a polled ring (mpi_ring.h). When rank 0 enters
// one its peers never issue, its wait() must throw the same diagnosis as a blocking collective, and
// the ring must give up: destroying the failed group joins its progress thread at once (a thread
// stuck in the ring would hang the destructor, which the test's own timeout would catch).
TEST_F(DistTest, RingTimeoutAbandonsTheRing) {
  if (size() < 2) GTEST_SKIP() << "needs a peer that does not join";
  std::vector<int> all;
  for (int r = 0; r < size(); ++r) all.push_back(r);
  for (const std::string op : {"all_reduce", "reduce_scatter", "all_gather"}) {
    ProcessGroupPtr late = world().split(all, fmt::format("late_{}", op));
    ASSERT_NE(late, nullptr);
    late->set_timeout(std::chrono::milliseconds(500));
    if (rank() == 0) {
      const int64_t total = 1 << 16;  // past MPI's eager limit: the ring waits on its peers
      Tensor full = Tensor::full({total}, 1.0f);
      Tensor chunk = Tensor::zeros({chunk_size(total, size(), 0)});
      WorkPtr w = op == "all_reduce"       ? late->all_reduce(full)
                  : op == "reduce_scatter" ? late->reduce_scatter(full, chunk)
                                           : late->all_gather(chunk, full);
      std::string message;
      try {
        w->wait();
      } catch (const Error& e) {
        message = e.what();
      }
      EXPECT_NE(message.find(fmt::format("{} seq 1", op)), std::string::npos) << message;
      EXPECT_NE(message.find("rank 1 [last issued seq 0, started seq 0]"), std::string::npos)
          << message;
      // The op's tensors, described only now that it timed out (not at issue).
      EXPECT_NE(message.find(fmt::format("f32[{}]", total)), std::string::npos) << message;
      const auto start = std::chrono::steady_clock::now();
      late.reset();
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                1.0);
    }
    world().barrier()->wait();
  }
}

TEST_F(DistTest, RecvTimeoutNamesThePeer) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  std::vector<int> all;
  for (int r = 0; r < size(); ++r) all.push_back(r);
  ProcessGroupPtr p2p = world().split(all, "p2p");
  ASSERT_NE(p2p, nullptr);
  p2p->set_timeout(std::chrono::milliseconds(500));
  Tensor t = Tensor::zeros({3});
  if (rank() == 0) {
    try {
      p2p->recv(t, 1, 5)->wait();
      ADD_FAILURE() << "the recv must time out";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("recv from rank 1 tag 5"), std::string::npos)
          << e.what();
    }
  }
  world().barrier()->wait();
  // Release rank 0's posted receive so the group shuts down cleanly.
  if (rank() == 1) p2p->send(t, 0, 5)->wait();
  world().barrier()->wait();
}

}  // namespace
}  // namespace braid::dist::testing
