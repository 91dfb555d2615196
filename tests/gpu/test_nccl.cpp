// NCCL backend tests: a one-rank NCCL group on cuda:0 against closed-form answers (skipped
// without a device), and host-only checks that run anywhere: dtype and reduce-op mapping, status
// text, argument checks, the padded-chunk plan and the failure messages.
//
// One rank makes every collective an identity (sum, avg, max and min of one input are that
// input; reduce_scatter and all_gather are copies), so these tests prove the plumbing (set-up,
// launch, streams, events, Works, split) rather than the arithmetic; tests/gpu/nccl_multi_rank.cpp
// checks the arithmetic on two GPUs. All values are small integers, exact in every dtype, so the
// comparisons are exact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "braid/core/storage.h"
#include "braid/core/tensor.h"
#include "braid/dist/process_group.h"
#include "braid/dist/solo_process_group.h"
#include "support/test_util.h"

#if defined(BRAID_WITH_CUDA) && defined(BRAID_WITH_NCCL)
#include <cuda_runtime_api.h>

#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"
#include "dist/nccl_support.h"
#endif

#if defined(BRAID_SIMT)

TEST(Nccl, NeedsRealGpus) {
  GTEST_SKIP() << "NCCL moves data between real GPUs; the SIMT emulator has no NCCL transport "
                  "(these tests run on a device: tests/gpu/run_device_checks.sh)";
}

#elif !defined(BRAID_WITH_CUDA) || !defined(BRAID_WITH_NCCL)

TEST(Nccl, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA or without NCCL";
}

#else

namespace braid::dist {
namespace {

const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};

// A host tensor of `dtype` holding `values` (small integers, exact in every dtype).
Tensor host_tensor(const std::vector<double>& values, DType dtype) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DType::f32:
        static_cast<float*>(t.data_ptr())[i] = static_cast<float>(v);
        break;
      case DType::bf16:
        static_cast<uint16_t*>(t.data_ptr())[i] = f32_to_bf16(static_cast<float>(v));
        break;
      case DType::f16:
        static_cast<uint16_t*>(t.data_ptr())[i] = f32_to_f16(static_cast<float>(v));
        break;
      case DType::i32:
        static_cast<int32_t*>(t.data_ptr())[i] = static_cast<int32_t>(v);
        break;
      case DType::i64:
        static_cast<int64_t*>(t.data_ptr())[i] = static_cast<int64_t>(v);
        break;
      case DType::u8:
        static_cast<uint8_t*>(t.data_ptr())[i] = static_cast<uint8_t>(v);
        break;
    }
  }
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  const Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  std::vector<double> out(static_cast<size_t>(h.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (h.dtype()) {
      case DType::f32:
        out[i] = static_cast<const float*>(h.data_ptr())[i];
        break;
      case DType::bf16:
        out[i] = bf16_to_f32(static_cast<const uint16_t*>(h.data_ptr())[i]);
        break;
      case DType::f16:
        out[i] = f16_to_f32(static_cast<const uint16_t*>(h.data_ptr())[i]);
        break;
      case DType::i32:
        out[i] = static_cast<const int32_t*>(h.data_ptr())[i];
        break;
      case DType::i64:
        out[i] = static_cast<double>(static_cast<const int64_t*>(h.data_ptr())[i]);
        break;
      case DType::u8:
        out[i] = static_cast<const uint8_t*>(h.data_ptr())[i];
        break;
    }
  }
  return out;
}

// i % 7 - 3 (or i % 7 for u8): negative, zero and positive values, all exact.
std::vector<double> pattern(int64_t n, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = dtype == DType::u8 ? i % 7 : i % 7 - 3;
  return v;
}

// A tensor that claims to live on cuda:`device` but wraps host memory: argument checks run on
// the host before anything touches a device.
Tensor fake_cuda(const Shape& shape, DType dtype = DType::f32, int device = 0) {
  const size_t bytes =
      static_cast<size_t>(std::max<int64_t>(shape_numel(shape), 1)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(std::malloc(bytes), bytes, Device::cuda(device),
                                           [](void* p) { std::free(p); });
  return Tensor::from_storage(storage, shape, dtype);
}

// ---- host-only ------------------------------------------------------------------------------

TEST(NcclHost, DtypeMapping) {
  EXPECT_EQ(nccl::nccl_dtype(DType::f32), ncclFloat32);
  EXPECT_EQ(nccl::nccl_dtype(DType::bf16), ncclBfloat16);
  EXPECT_EQ(nccl::nccl_dtype(DType::f16), ncclFloat16);
  EXPECT_EQ(nccl::nccl_dtype(DType::i32), ncclInt32);
  EXPECT_EQ(nccl::nccl_dtype(DType::i64), ncclInt64);
  EXPECT_EQ(nccl::nccl_dtype(DType::u8), ncclUint8);
}

TEST(NcclHost, ReduceOpMapping) {
  EXPECT_EQ(nccl::nccl_reduce_op(ReduceOp::sum), ncclSum);
  EXPECT_EQ(nccl::nccl_reduce_op(ReduceOp::avg), ncclAvg);
  EXPECT_EQ(nccl::nccl_reduce_op(ReduceOp::max), ncclMax);
  EXPECT_EQ(nccl::nccl_reduce_op(ReduceOp::min), ncclMin);
}

TEST(NcclHost, StatusText) {
  EXPECT_EQ(nccl::result_name(ncclInvalidArgument), "ncclInvalidArgument");
  EXPECT_EQ(nccl::result_name(ncclRemoteError), "ncclRemoteError");
  EXPECT_NE(nccl::describe_status(ncclSystemError).find("ncclSystemError ("), std::string::npos);
  EXPECT_ERROR_CONTAINS(BRAID_NCCL_CHECK(ncclInternalError), "ncclInternalError");
}

TEST(NcclHost, FinishCallPassesSuccessAndReportsErrors) {
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  nccl::finish_call(nullptr, ncclSuccess, "ncclNothing", later);
  EXPECT_ERROR_CONTAINS(nccl::finish_call(nullptr, ncclInvalidUsage, "ncclAllReduce", later),
                        "ncclAllReduce failed: ncclInvalidUsage");
}

TEST(NcclHost, CpuTensorNamesTheMpiBackend) {
  const Tensor t = Tensor::zeros({4});
  EXPECT_ERROR_CONTAINS(nccl::check_tensor("dp", "all_reduce", "tensor", t, 0), "MPI backend");
  EXPECT_ERROR_CONTAINS(nccl::check_tensor("dp", "all_reduce", "tensor", t, 0),
                        "all_reduce on group 'dp': tensor f32[4] is on cpu");
}

TEST(NcclHost, NonContiguousTensorIsRejected) {
  const Tensor t = fake_cuda({4, 8});
  nccl::check_tensor("tp", "all_gather", "input", t, 0);  // dense: accepted
  const Tensor transposed = t.alias({8, 4}, {1, 8}, 0);
  EXPECT_ERROR_CONTAINS(nccl::check_tensor("tp", "all_gather", "input", transposed, 0),
                        "is not contiguous");
  EXPECT_ERROR_CONTAINS(nccl::check_tensor("tp", "all_gather", "input", transposed, 0),
                        "t.contiguous()");
}

TEST(NcclHost, TensorOnAnotherDeviceIsRejected) {
  const Tensor t = fake_cuda({4}, DType::f32, 0);
  EXPECT_ERROR_CONTAINS(nccl::check_tensor("pp", "send", "tensor", t, 1),
                        "is on cuda:0, but the group communicates from cuda:1");
}

TEST(NcclHost, UndefinedTensorAndDtypeMismatchAreRejected) {
  EXPECT_ERROR_CONTAINS(nccl::check_tensor("dp", "broadcast", "tensor", Tensor(), 0),
                        "undefined tensor");
  EXPECT_ERROR_CONTAINS(
      nccl::check_same_dtype("dp", "reduce_scatter", fake_cuda({4}), fake_cuda({2}, DType::bf16)),
      "differ in dtype");
}

TEST(NcclHost, PeerChecks) {
  nccl::check_peer("pp", "send", 1, 0, 2);
  EXPECT_ERROR_CONTAINS(nccl::check_peer("pp", "send", 2, 0, 2), "peer 2 is not a rank");
  EXPECT_ERROR_CONTAINS(nccl::check_peer("pp", "send", -1, 0, 2), "peer -1 is not a rank");
  EXPECT_ERROR_CONTAINS(nccl::check_peer("pp", "send", 0, 0, 2), "cannot send to itself");
  EXPECT_ERROR_CONTAINS(nccl::check_peer("pp", "recv", 1, 1, 2), "cannot receive from itself");
}

// The staging layout must hold exactly process_group.h's chunks: chunk i (at chunk_offset, of
// chunk_size elements) in slot i, and the two-copy pack (full chunks contiguous, short chunks one
// 2-D copy) must address the same elements.
TEST(NcclHost, ChunkPlanMatchesProcessGroupChunks) {
  for (int parts = 1; parts <= 6; ++parts) {
    for (int64_t total = 0; total <= 40; ++total) {
      const nccl::ChunkPlan plan = nccl::plan_chunks(total, parts);
      SCOPED_TRACE(::testing::Message() << total << " over " << parts);
      EXPECT_EQ(plan.even(), total % parts == 0);
      EXPECT_EQ(plan.padded * parts >= total, true);
      EXPECT_LT(plan.padded * parts - total, parts);  // at most one padding element per slot
      for (int i = 0; i < parts; ++i) {
        const int64_t size = chunk_size(total, parts, i);
        const int64_t offset = chunk_offset(total, parts, i);
        EXPECT_LE(size, plan.padded);
        EXPECT_EQ(size, i < plan.extra ? plan.padded : plan.base);
        // Where the pack copies read chunk i from.
        const int64_t read_at = i < plan.extra
                                    ? i * plan.padded
                                    : plan.extra * plan.padded + (i - plan.extra) * plan.base;
        EXPECT_EQ(read_at, offset);
      }
    }
  }
  EXPECT_ERROR_CONTAINS(nccl::plan_chunks(4, 0), "0 parts");
}

nccl::FailedOp sample_op() {
  nccl::FailedOp op;
  op.group = "dp";
  op.size = 8;
  op.rank = 3;
  op.device = 1;
  op.op = "all_reduce";
  op.seq = 42;
  op.detail = "f32[1024] sum";
  op.timeout_s = 30;
  op.elapsed_s = 30.5;
  return op;
}

TEST(NcclHost, AsyncErrorMessageNamesTheError) {
  const std::string m =
      nccl::async_error_message(sample_op(), "NCCL error ncclRemoteError (remote process exited)");
  EXPECT_NE(m.find("group 'dp' (nccl, 8 ranks) failed on rank 3"), std::string::npos) << m;
  EXPECT_NE(m.find("all_reduce seq 42"), std::string::npos) << m;
  EXPECT_NE(m.find("ncclRemoteError"), std::string::npos) << m;
}

TEST(NcclHost, CreateChecksItsArguments) {
  EXPECT_ERROR_CONTAINS(NcclProcessGroup::create(nullptr, 0, "g"), "bootstrap group is null");
  auto solo = std::make_shared<SoloProcessGroup>("solo");
  if (cuda::device_count() == 0) {
    EXPECT_ERROR_CONTAINS(NcclProcessGroup::create(solo, 0, "g"), "no CUDA device");
  } else {
    EXPECT_ERROR_CONTAINS(NcclProcessGroup::create(solo, cuda::device_count(), "g"),
                          "does not exist");
  }
}

// ---- one rank on cuda:0 -----------------------------------------------------------------------

class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cuda::ensure_registered();
    if (!group_)
      group_ = NcclProcessGroup::create(std::make_shared<SoloProcessGroup>("solo"), 0, "nccl1");
  }
  // Destroyed here rather than at exit, while the CUDA runtime is certainly still up.
  static void TearDownTestSuite() { group_.reset(); }

  static Tensor gpu(const std::vector<double>& values, DType dtype) {
    return host_tensor(values, dtype).to(Device::cuda(0));
  }

  static std::shared_ptr<NcclProcessGroup> group_;
};
std::shared_ptr<NcclProcessGroup> NcclOneRank::group_;

TEST_F(NcclOneRank, Basics) {
  EXPECT_EQ(group_->backend(), "nccl");
  EXPECT_EQ(group_->rank(), 0);
  EXPECT_EQ(group_->size(), 1);
  EXPECT_EQ(group_->device(), 0);
  EXPECT_EQ(group_->name(), "nccl1");
}

TEST_F(NcclOneRank, AllReduceEveryOpAndDtypeIsTheInput) {
  for (DType dtype : kDtypes) {
    for (ReduceOp op : kOps) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << reduce_op_name(op));
      const std::vector<double> expected = pattern(1000, dtype);
      Tensor t = gpu(expected, dtype);
      WorkPtr work = group_->all_reduce(t, op);
      work->wait();
      EXPECT_EQ(values_of(t), expected);
      EXPECT_EQ(work->error(), nullptr);
    }
  }
}

TEST_F(NcclOneRank, ReduceScatterAndAllGatherAreCopies) {
  for (DType dtype : {DType::f32, DType::bf16, DType::i64, DType::u8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<double> expected = pattern(37, dtype);
    const Tensor in = gpu(expected, dtype);
    Tensor out = Tensor::empty({37}, dtype, Device::cuda(0));
    group_->reduce_scatter(in, out, ReduceOp::sum)->wait();
    EXPECT_EQ(values_of(out), expected);
    Tensor gathered = Tensor::empty({37}, dtype, Device::cuda(0));
    group_->all_gather(out, gathered)->wait();
    EXPECT_EQ(values_of(gathered), expected);
    // In place (output is input's own chunk): NCCL's in-place layout.
    Tensor same = gpu(expected, dtype);
    group_->all_gather(same, same)->wait();
    EXPECT_EQ(values_of(same), expected);
  }
}

TEST_F(NcclOneRank, BroadcastKeepsTheRootsValues) {
  const std::vector<double> expected = pattern(64, DType::f16);
  Tensor t = gpu(expected, DType::f16);
  group_->broadcast(t, 0)->wait();
  EXPECT_EQ(values_of(t), expected);
  EXPECT_ERROR_CONTAINS(group_->broadcast(t, 1), "root 1 is not a rank");
}

TEST_F(NcclOneRank, EmptyTensorsAreFine) {
  Tensor t = Tensor::empty({0}, DType::f32, Device::cuda(0));
  group_->all_reduce(t)->wait();
  group_->broadcast(t, 0)->wait();
  Tensor out = Tensor::empty({0}, DType::f32, Device::cuda(0));
  group_->reduce_scatter(t, out)->wait();
  group_->all_gather(t, out)->wait();
  group_->synchronize();
}

TEST_F(NcclOneRank, WorkCompletesAndSynchronizes) {
  Tensor t = gpu(pattern(1 << 20, DType::f32), DType::f32);
  WorkPtr work = group_->all_reduce(t, ReduceOp::max);
  auto* nccl_work = dynamic_cast<NcclWork*>(work.get());
  ASSERT_NE(nccl_work, nullptr);
  nccl_work->synchronize();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(work->error(), nullptr);
  // is_completed() also turns true by itself, without wait().
  WorkPtr second = group_->all_reduce(t, ReduceOp::min);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!second->is_completed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(second->is_completed());
  group_->synchronize();
}

// The dropped Work and tensor must stay valid until the device is done with them.
TEST_F(NcclOneRank, TensorsStayAliveWithoutTheCaller) {
  for (int i = 0; i < 8; ++i) {
    Tensor t = gpu(pattern(4096, DType::i32), DType::i32);
    group_->all_reduce(t);
  }
  group_->synchronize();
}

TEST_F(NcclOneRank, BarrierBlocksTheHost) {
  WorkPtr work = group_->barrier();
  work->wait();
  EXPECT_TRUE(work->is_completed());
}

TEST_F(NcclOneRank, SplitByColor) {
  auto sub = group_->split_by_color(0, 0, "nccl1-sub");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->backend(), "nccl");
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->name(), "nccl1-sub");
  EXPECT_EQ(sub->timeout(), group_->timeout());
  const std::vector<double> expected = pattern(100, DType::bf16);
  Tensor t = gpu(expected, DType::bf16);
  sub->all_reduce(t, ReduceOp::avg)->wait();
  EXPECT_EQ(values_of(t), expected);
  EXPECT_EQ(group_->split_by_color(-1, 0, "none"), nullptr);
}

TEST_F(NcclOneRank, ArgumentErrors) {
  Tensor host = Tensor::zeros({4});
  EXPECT_ERROR_CONTAINS(group_->all_reduce(host), "MPI backend");
  Tensor dense = Tensor::zeros({4, 8}).to(Device::cuda(0));
  Tensor strided = dense.alias({8, 4}, {1, 8}, 0);
  EXPECT_ERROR_CONTAINS(group_->all_reduce(strided), "not contiguous");
  Tensor out = Tensor::empty({5}, DType::f32, Device::cuda(0));
  EXPECT_ERROR_CONTAINS(group_->reduce_scatter(dense, out), "must receive chunk_size(32, 1, 0)");
  EXPECT_ERROR_CONTAINS(group_->send(dense, 0), "cannot send to itself");
  // Errors at issue time do not break the group.
  Tensor t = gpu({1, 2, 3}, DType::f32);
  group_->all_reduce(t)->wait();
  EXPECT_EQ(values_of(t), (std::vector<double>{1, 2, 3}));
}

// The staging copies of uneven reduce_scatter / all_gather, checked on the device without NCCL
// (one rank never needs them).
TEST_F(NcclOneRank, PackAndUnpackChunks) {
  struct Case {
    int64_t total;
    int parts;
    std::vector<double> packed;  // slot by slot, padding zero
  };
  const Case cases[] = {
      {10, 4, {0, 1, 2, 3, 4, 5, 6, 7, 0, 8, 9, 0}},
      {3, 4, {0, 1, 2, 0}},
      {8, 4, {0, 1, 2, 3, 4, 5, 6, 7}},
      {7, 3, {0, 1, 2, 3, 4, 0, 5, 6, 0}},
  };
  for (DType dtype : {DType::f32, DType::u8, DType::i64, DType::bf16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << c.total << "/" << c.parts);
      std::vector<double> values(static_cast<size_t>(c.total));
      for (int64_t i = 0; i < c.total; ++i) values[i] = static_cast<double>(i);
      const nccl::ChunkPlan plan = nccl::plan_chunks(c.total, c.parts);
      ASSERT_EQ(plan.staged_numel(), static_cast<int64_t>(c.packed.size()));
      const Tensor src = gpu(values, dtype);
      // Filled with 7s first, so the test sees that pack writes the padding zeros.
      Tensor packed = gpu(std::vector<double>(c.packed.size(), 7), dtype);
      nccl::pack_chunks(src.data_ptr(), packed.data_ptr(), plan, dtype_size(dtype), nullptr);
      ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
      EXPECT_EQ(values_of(packed), c.packed);
      Tensor back = gpu(std::vector<double>(values.size(), 7), dtype);
      nccl::unpack_chunks(packed.data_ptr(), back.data_ptr(), plan, dtype_size(dtype), nullptr);
      ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
      EXPECT_EQ(values_of(back), values);
    }
  }
}

}  // namespace
}  // namespace braid::dist

#endif
