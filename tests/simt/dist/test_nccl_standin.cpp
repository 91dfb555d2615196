// NcclProcessGroup on the emulated device over the stand-in transport, under mpirun: every
// collective on device tensors against closed-form answers, the stream ordering of its Works,
// argument errors, and the same split as the MPI backend.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "braid/core/stream.h"
#include "braid/core/tensor.h"
#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

class NcclStandin : public DistTest {
 protected:
  static void SetUpTestSuite() {
    cuda::ensure_registered();
    group_ = NcclProcessGroup::create(environment().world(), 0, "nccl-world");
  }
  static void TearDownTestSuite() { group_.reset(); }

  static Device gpu() { return Device::cuda(0); }
  // x[i] = (rank + 1) * (i + 1) on the device: sums and extremes have closed forms.
  static Tensor ramp(int64_t n, int r) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((r + 1) * (i + 1));
    return Tensor::from_vector(v, {n}).to(gpu());
  }
  static std::vector<float> host(const Tensor& t) { return t.to(Device::cpu()).to_vector(); }
  // 1 + 2 + ... + size
  static double rank_sum() { return size() * (size() + 1) / 2.0; }

  static std::shared_ptr<NcclProcessGroup> group_;
};

std::shared_ptr<NcclProcessGroup> NcclStandin::group_;

TEST_F(NcclStandin, RunsOnTheStandinTransport) {
  EXPECT_EQ(group_->transport(), "stand-in (MPI)");
  EXPECT_EQ(group_->backend(), "nccl");
  EXPECT_EQ(group_->rank(), rank());
  EXPECT_EQ(group_->size(), size());
}

TEST_F(NcclStandin, AllReduceEveryOp) {
  const int64_t n = 37;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
    Tensor t = ramp(n, rank());
    group_->all_reduce(t, op)->wait();
    const std::vector<float> got = host(t);
    for (int64_t i = 0; i < n; ++i) {
      const double base = static_cast<double>(i + 1);
      double want = 0;
      switch (op) {
        case ReduceOp::sum:
          want = rank_sum() * base;
          break;
        case ReduceOp::avg:
          want = rank_sum() * base / size();
          break;
        case ReduceOp::max:
          want = size() * base;
          break;
        case ReduceOp::min:
          want = base;
          break;
      }
      // Small integers (and avg's halves) are exact in f32.
      ASSERT_EQ(got[i], static_cast<float>(want)) << reduce_op_name(op) << " at " << i;
    }
  }
}

TEST_F(NcclStandin, AllReduceIntegers) {
  Tensor t = Tensor::from_vector(std::vector<int32_t>{rank(), 10 * rank(), -rank()}, {3}).to(gpu());
  group_->all_reduce(t, ReduceOp::sum)->wait();
  const Tensor back = t.to(Device::cpu());
  const int32_t s = size() * (size() - 1) / 2;
  EXPECT_EQ(back.data<int32_t>()[0], s);
  EXPECT_EQ(back.data<int32_t>()[1], 10 * s);
  EXPECT_EQ(back.data<int32_t>()[2], -s);
}

TEST_F(NcclStandin, Broadcast) {
  for (int root = 0; root < size(); ++root) {
    Tensor t = ramp(9, rank());
    group_->broadcast(t, root)->wait();
    const std::vector<float> got = host(t);
    for (int64_t i = 0; i < 9; ++i) ASSERT_EQ(got[i], static_cast<float>((root + 1) * (i + 1)));
  }
}

TEST_F(NcclStandin, AllGatherEvenAndUneven) {
  for (int64_t total : {int64_t{8}, int64_t{7}, int64_t{1}}) {
    const int64_t mine = chunk_size(total, size(), rank());
    // Element j of rank r's chunk holds 100 r + j.
    std::vector<float> v(mine);
    for (int64_t j = 0; j < mine; ++j) v[j] = static_cast<float>(100 * rank() + j);
    Tensor in = Tensor::from_vector(v, {mine}).to(gpu());
    Tensor out = Tensor::zeros({total}).to(gpu());
    group_->all_gather(in, out)->wait();
    const std::vector<float> got = host(out);
    for (int r = 0; r < size(); ++r)
      for (int64_t j = 0; j < chunk_size(total, size(), r); ++j)
        ASSERT_EQ(got[chunk_offset(total, size(), r) + j], static_cast<float>(100 * r + j))
            << "total " << total << " rank " << r << " element " << j;
  }
}

TEST_F(NcclStandin, ReduceScatterEvenAndUneven) {
  for (int64_t total : {int64_t{8}, int64_t{7}}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
      Tensor in = ramp(total, rank());
      Tensor out = Tensor::zeros({chunk_size(total, size(), rank())}).to(gpu());
      group_->reduce_scatter(in, out, op)->wait();
      const std::vector<float> got = host(out);
      const int64_t offset = chunk_offset(total, size(), rank());
      for (size_t j = 0; j < got.size(); ++j) {
        const double base = static_cast<double>(offset + j + 1);
        const double want = op == ReduceOp::sum ? rank_sum() * base : size() * base;
        ASSERT_EQ(got[j], static_cast<float>(want)) << "total " << total << " element " << j;
      }
    }
  }
}

TEST_F(NcclStandin, SendRecvInARing) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (rank() + 1) % size();
  const int prev = (rank() + size() - 1) % size();
  Tensor out = ramp(5, rank());
  Tensor in = Tensor::zeros({5}).to(gpu());
  // Even ranks send first, odd ranks receive first: NCCL's send occupies the stream.
  if (rank() % 2 == 0) {
    group_->send(out, next)->wait();
    group_->recv(in, prev)->wait();
  } else {
    group_->recv(in, prev)->wait();
    group_->send(out, next)->wait();
  }
  const std::vector<float> got = host(in);
  for (int64_t i = 0; i < 5; ++i) ASSERT_EQ(got[i], static_cast<float>((prev + 1) * (i + 1)));
}

TEST_F(NcclStandin, BarrierBlocksTheHostAndCompletes) {
  WorkPtr work = group_->barrier();
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(work->error(), nullptr);
}

TEST_F(NcclStandin, WaitOrdersTheCallersStreamAndSynchronizeDrains) {
  // The result is read back on the compute stream, which wait() made wait for the done event.
  Tensor t = ramp(4, rank());
  WorkPtr work = group_->all_reduce(t);
  work->wait();
  EXPECT_EQ(host(t)[3], static_cast<float>(rank_sum() * 4));
  group_->synchronize();
  EXPECT_TRUE(work->is_completed());
  auto* nccl_work = dynamic_cast<NcclWork*>(work.get());
  ASSERT_NE(nccl_work, nullptr);
  nccl_work->synchronize();
}

TEST_F(NcclStandin, RejectsHostAndMismatchedTensors) {
  Tensor host_tensor = Tensor::zeros({4});
  try {
    group_->all_reduce(host_tensor);
    FAIL() << "a CPU tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI backend"), std::string::npos) << e.what();
  }
  Tensor in = Tensor::zeros({8}).to(gpu());
  Tensor wrong = Tensor::zeros({8}).to(gpu());
  if (size() > 1) {
    try {
      group_->reduce_scatter(in, wrong);
      FAIL() << "a full-size reduce_scatter output was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("chunk_size"), std::string::npos) << e.what();
    }
  }
}

TEST_F(NcclStandin, SplitMakesSubgroupsOnTheSameTransport) {
  // Halves by parity, ordered by world rank, as MPI_Comm_split does.
  auto sub = group_->split_by_color(rank() % 2, rank(), "nccl-parity");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->backend(), "nccl");
  const int members = (size() - rank() % 2 + 1) / 2;
  EXPECT_EQ(sub->size(), members);
  EXPECT_EQ(sub->rank(), rank() / 2);
  Tensor t = Tensor::full({3}, 1.0f).to(gpu());
  sub->all_reduce(t)->wait();
  EXPECT_EQ(host(t)[0], static_cast<float>(members));
}

}  // namespace
}  // namespace braid::dist::testing
