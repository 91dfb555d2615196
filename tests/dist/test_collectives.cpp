// Every MPI collective against closed-form answers, on worlds of 1 to 4 ranks.
//
// Rank r contributes values built from r + 1, so sums are N(N+1)/2-style formulas, and every
// value is an integer small enough to be exact in each dtype: results are compared exactly.
#include <cmath>

#include "braid/dist/mpi_process_group.h"
#include "dist_test.h"

namespace braid::dist::testing {
namespace {

constexpr DType kExactTypes[] = {DType::f32, DType::i32, DType::i64, DType::u8};

TEST_F(DistTest, WorldDescribesTheJob) {
  const Environment& env = environment();
  EXPECT_EQ(world().backend(), "mpi");
  EXPECT_EQ(world().rank(), env.world_rank());
  EXPECT_EQ(world().size(), env.world_size());
  ASSERT_EQ(static_cast<int>(world().world_ranks().size()), size());
  for (int r = 0; r < size(); ++r) EXPECT_EQ(world().world_ranks()[r], r);
  EXPECT_GE(env.local_rank(), 0);
  EXPECT_LT(env.local_rank(), env.local_size());
  EXPECT_GE(env.threads_per_rank(), 1);
}

TEST_F(DistTest, AllReduceEveryOpAndExactDtype) {
  const int n = size();
  for (DType dtype : kExactTypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      Tensor t = Tensor::full({7}, static_cast<float>(rank() + 1), dtype);
      world().all_reduce(t, op)->wait();
      double expected = 0;
      switch (op) {
        case ReduceOp::sum:
          expected = n * (n + 1) / 2;
          break;
        // Integers: the sum divided with truncation, (N+1)/2 in integer arithmetic.
        case ReduceOp::avg:
          expected = dtype == DType::f32 ? (n + 1) / 2.0 : static_cast<double>((n + 1) / 2);
          break;
        case ReduceOp::max:
          expected = n;
          break;
        case ReduceOp::min:
          expected = 1;
          break;
      }
      for (int64_t i = 0; i < t.numel(); ++i)
        ASSERT_EQ(value_at(t, i), expected)
            << dtype_name(dtype) << " " << reduce_op_name(op) << " element " << i;
    }
  }
}

TEST_F(DistTest, AllReduceI64UsesAll64Bits) {
  // (r+1) * 2^33 does not fit 32 bits; a 32-bit reduction would lose the high words.
  const double unit = std::ldexp(1.0, 33);
  Tensor t = Tensor::full({3}, static_cast<float>((rank() + 1) * unit), DType::i64);
  world().all_reduce(t)->wait();
  const int64_t expected = static_cast<int64_t>(size()) * (size() + 1) / 2 * (int64_t{1} << 33);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(t.data<int64_t>()[i], expected);
}

TEST_F(DistTest, AllReduceU8SumWrapsModulo256) {
  Tensor t = Tensor::full({2}, 200.0f, DType::u8);
  world().all_reduce(t)->wait();
  EXPECT_EQ(t.data<uint8_t>()[0], static_cast<uint8_t>(200 * size()));
}

// bf16/f16 reduce in f32 and round once: rank 0 holds a large value L, the others 1. Summing
// in the 16-bit type would round after each addition and lose the 1s (L + 1 rounds back to L
// at these magnitudes); the right answer is L + (N-1) rounded to nearest-even once.
TEST_F(DistTest, AllReduceBf16RoundsTheF32SumOnce) {
  const int n = size();
  const float large = 256.0f;  // bf16 spacing at 256 is 2
  Tensor t = Tensor::full({5}, rank() == 0 ? large : 1.0f, DType::bf16);
  world().all_reduce(t)->wait();
  const uint16_t expected = f32_to_bf16(large + static_cast<float>(n - 1));
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(bits_at(t, i), expected)
        << "got " << bf16_to_f32(bits_at(t, i)) << ", want " << bf16_to_f32(expected);

  Tensor avg = Tensor::full({5}, rank() == 0 ? large : 1.0f, DType::bf16);
  world().all_reduce(avg, ReduceOp::avg)->wait();
  const uint16_t expected_avg = f32_to_bf16((large + static_cast<float>(n - 1)) / n);
  EXPECT_EQ(bits_at(avg, 0), expected_avg);

  Tensor mx = Tensor::full({3}, -1.5f * (rank() + 1), DType::bf16);
  Tensor mn = Tensor::full({3}, -1.5f * (rank() + 1), DType::bf16);
  world().all_reduce(mx, ReduceOp::max)->wait();
  world().all_reduce(mn, ReduceOp::min)->wait();
  EXPECT_EQ(bf16_to_f32(bits_at(mx, 2)), -1.5f);
  EXPECT_EQ(bf16_to_f32(bits_at(mn, 2)), -1.5f * n);
}

TEST_F(DistTest, AllReduceF16RoundsTheF32SumOnce) {
  const int n = size();
  const float large = 2048.0f;  // f16 spacing at 2048 is 2
  Tensor t = Tensor::full({5}, rank() == 0 ? large : 1.0f, DType::f16);
  world().all_reduce(t)->wait();
  const uint16_t expected = f32_to_f16(large + static_cast<float>(n - 1));
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(bits_at(t, i), expected)
        << "got " << f16_to_f32(bits_at(t, i)) << ", want " << f16_to_f32(expected);
  Tensor avg = Tensor::full({1}, 0.5f * (rank() + 1), DType::f16);
  world().all_reduce(avg, ReduceOp::avg)->wait();
  EXPECT_EQ(bits_at(avg, 0), f32_to_f16(0.5f * n * (n + 1) / 2 / n));
}

// Element i of rank r's input is (r+1)(i+1), so the reduced element i is (i+1) N(N+1)/2.
TEST_F(DistTest, ReduceScatterUnevenChunks) {
  const int n = size();
  const double ranks_sum = n * (n + 1) / 2.0;
  for (int64_t total : {int64_t{7}, int64_t{13}, int64_t{3}, int64_t{1}}) {
    for (DType dtype : {DType::f32, DType::i32, DType::i64, DType::bf16}) {
      Tensor in = Tensor::empty({total}, dtype);
      for (int64_t i = 0; i < total; ++i)
        in.narrow(0, i, 1).fill_(static_cast<float>((rank() + 1) * (i + 1)));
      Tensor out = Tensor::full({chunk_size(total, n, rank())}, -7.0f, dtype);
      world().reduce_scatter(in, out)->wait();
      const int64_t offset = chunk_offset(total, n, rank());
      for (int64_t j = 0; j < out.numel(); ++j)
        ASSERT_EQ(value_at(out, j), (offset + j + 1) * ranks_sum)
            << dtype_name(dtype) << " total " << total << " element " << j;
    }
  }
}

TEST_F(DistTest, ReduceScatterMaxAndAvg) {
  const int n = size();
  const int64_t total = 13;
  Tensor in = Tensor::full({total}, static_cast<float>(rank() + 1));
  Tensor out = Tensor::empty({chunk_size(total, n, rank())});
  world().reduce_scatter(in, out, ReduceOp::max)->wait();
  for (float v : out.to_vector()) EXPECT_EQ(v, n);
  world().reduce_scatter(in, out, ReduceOp::avg)->wait();
  for (float v : out.to_vector()) EXPECT_EQ(v, (n + 1) / 2.0f);
}

// Every reduction op on every dtype the ring reduces itself, over a buffer of a few hundred
// thousand elements (several ring steps of real size, uneven chunks).
TEST_F(DistTest, ReduceScatterEveryOpAndExactDtype) {
  const int n = size();
  const int64_t total = 300007;
  for (DType dtype : kExactTypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      // Element i of rank r: (r + 1) + (i % 5), so every reduction has a closed form.
      std::vector<float> values(total);
      for (int64_t i = 0; i < total; ++i) values[i] = static_cast<float>(rank() + 1 + i % 5);
      Tensor in = Tensor::from_vector(values, {total}).to(dtype);
      Tensor out = Tensor::empty({chunk_size(total, n, rank())}, dtype);
      world().reduce_scatter(in, out, op)->wait();
      const int64_t offset = chunk_offset(total, n, rank());
      for (int64_t j = 0; j < out.numel(); ++j) {
        const double base = static_cast<double>((offset + j) % 5);
        double want = 0;
        switch (op) {
          case ReduceOp::sum:
            want = n * base + n * (n + 1) / 2.0;
            break;
          case ReduceOp::avg:
            want = dtype == DType::f32 ? base + (n + 1) / 2.0
                                       : std::trunc((n * base + n * (n + 1) / 2.0) / n);
            break;
          case ReduceOp::max:
            want = base + n;
            break;
          case ReduceOp::min:
            want = base + 1;
            break;
        }
        ASSERT_EQ(value_at(out, j), want)
            << dtype_name(dtype) << " " << reduce_op_name(op) << " element " << offset + j;
      }
    }
  }
}

// The ring folds chunk i from rank i + 1 onward: ((x[i+1] + x[i+2]) + ...) + x[i]. With values
// of very different magnitudes f32 addition is far from associative, so only that exact order
// reproduces the result bit for bit.
TEST_F(DistTest, ReduceScatterFoldsInRingOrder) {
  const int n = size();
  const int64_t total = 4099;
  auto contribution = [](int r, int64_t i) {
    return static_cast<float>(std::sin(1.7 * r + 0.37 * i) * std::pow(10.0, (r * 3 + i) % 9 - 4));
  };
  std::vector<float> mine(total);
  for (int64_t i = 0; i < total; ++i) mine[i] = contribution(rank(), i);
  Tensor in = Tensor::from_vector(mine, {total});
  Tensor out = Tensor::empty({chunk_size(total, n, rank())});
  world().reduce_scatter(in, out)->wait();
  const int64_t offset = chunk_offset(total, n, rank());
  for (int64_t j = 0; j < out.numel(); ++j) {
    float want = contribution((rank() + 1) % n, offset + j);
    for (int k = 2; k <= n; ++k) want += contribution((rank() + k) % n, offset + j);
    ASSERT_EQ(out.data<float>()[j], want) << "element " << offset + j;
  }
}

// The output may be the input's own chunk (the ZeRO-1 flat buffers do this).
TEST_F(DistTest, ReduceScatterInPlaceIntoOwnChunk) {
  const int n = size();
  const int64_t total = 1001;
  Tensor in = Tensor::full({total}, static_cast<float>(rank() + 1));
  Tensor own = in.narrow(0, chunk_offset(total, n, rank()), chunk_size(total, n, rank()));
  world().reduce_scatter(in, own)->wait();
  for (float v : own.to_vector()) EXPECT_EQ(v, n * (n + 1) / 2.0f);
}

// Rank r contributes its chunk of 0..total-1, so the gathered tensor is exactly 0..total-1.
TEST_F(DistTest, AllGatherUnevenChunks) {
  const int n = size();
  for (int64_t total : {int64_t{7}, int64_t{13}, int64_t{3}, int64_t{1}}) {
    for (DType dtype : {DType::f32, DType::i64, DType::u8, DType::bf16, DType::f16}) {
      const int64_t count = chunk_size(total, n, rank()), offset = chunk_offset(total, n, rank());
      Tensor in = Tensor::empty({count}, dtype);
      for (int64_t j = 0; j < count; ++j) in.narrow(0, j, 1).fill_(static_cast<float>(offset + j));
      Tensor out = Tensor::full({total}, -1.0f, dtype);
      world().all_gather(in, out)->wait();
      for (int64_t i = 0; i < total; ++i)
        ASSERT_EQ(value_at(out, i), i) << dtype_name(dtype) << " total " << total;
    }
  }
}

// Chunks of hundreds of KiB, not a multiple of the 256 KiB slices in which the ring copies a
// rank's own chunk into place between tests of the transfer (mpi_ring.cpp).
TEST_F(DistTest, AllGatherLargeChunks) {
  const int n = size();
  const int64_t total = 300007;
  const int64_t count = chunk_size(total, n, rank()), offset = chunk_offset(total, n, rank());
  Tensor in = Tensor::empty({count});
  for (int64_t j = 0; j < count; ++j) in.data<float>()[j] = static_cast<float>(offset + j);
  Tensor out = Tensor::full({total}, -1.0f);
  world().all_gather(in, out)->wait();
  const std::vector<float> gathered = out.to_vector();
  for (int64_t i = 0; i < total; ++i) ASSERT_EQ(gathered[i], static_cast<float>(i)) << i;
}

TEST_F(DistTest, AllGatherInPlaceFromOwnSlot) {
  const int n = size();
  const int64_t total = 13;
  Tensor out = Tensor::full({total}, -1.0f);
  const int64_t count = chunk_size(total, n, rank()), offset = chunk_offset(total, n, rank());
  Tensor mine = out.narrow(0, offset, count);  // shares storage: MPI_IN_PLACE
  for (int64_t j = 0; j < count; ++j) mine.narrow(0, j, 1).fill_(static_cast<float>(offset + j));
  world().all_gather(mine, out)->wait();
  for (int64_t i = 0; i < total; ++i) EXPECT_EQ(value_at(out, i), i);
}

TEST_F(DistTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    for (DType dtype : {DType::f32, DType::i64, DType::bf16}) {
      Tensor t = Tensor::full({9}, rank() == root ? 40.0f + root : -1.0f, dtype);
      world().broadcast(t, root)->wait();
      for (int64_t i = 0; i < 9; ++i)
        ASSERT_EQ(value_at(t, i), 40.0 + root) << dtype_name(dtype) << " root " << root;
    }
  }
}

// Everyone sends before receiving, with a message far above the eager limit: blocking sends
// run one after the other would deadlock here.
TEST_F(DistTest, SendRecvRing) {
  const int n = size(), next = (rank() + 1) % n, prev = (rank() + n - 1) % n;
  const int64_t numel = 1 << 16;
  Tensor out = Tensor::full({numel}, static_cast<float>(rank()));
  Tensor in = Tensor::full({numel}, -1.0f);
  WorkPtr sent = world().send(out, next, 3);
  WorkPtr received = world().recv(in, prev, 3);
  received->wait();
  sent->wait();
  const std::vector<float> got = in.to_vector();
  EXPECT_EQ(got.front(), prev);
  EXPECT_EQ(got.back(), prev);
}

// Messages are matched by tag, not by issue order: the receiver asks for tag 2 first.
TEST_F(DistTest, SendRecvMatchesByTag) {
  const int n = size(), next = (rank() + 1) % n, prev = (rank() + n - 1) % n;
  Tensor one = Tensor::full({4}, 1.0f), two = Tensor::full({4}, 2.0f);
  Tensor got_two = Tensor::zeros({4}), got_one = Tensor::zeros({4});
  WorkPtr s1 = world().send(one, next, 1);
  WorkPtr s2 = world().send(two, next, 2);
  WorkPtr r2 = world().recv(got_two, prev, 2);
  WorkPtr r1 = world().recv(got_one, prev, 1);
  for (const WorkPtr& w : {s1, s2, r2, r1}) w->wait();
  EXPECT_EQ(got_one.to_vector()[3], 1.0f);
  EXPECT_EQ(got_two.to_vector()[3], 2.0f);
}

TEST_F(DistTest, RecvOfTheWrongSizeFails) {
  const int n = size(), next = (rank() + 1) % n, prev = (rank() + n - 1) % n;
  Tensor out = Tensor::full({3}, 1.0f), in = Tensor::zeros({5});
  WorkPtr sent = world().send(out, next, 9);
  WorkPtr received = world().recv(in, prev, 9);
  sent->wait();
  try {
    received->wait();
    ADD_FAILURE() << "a 3-element message into a 5-element recv must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got 3 elements, expected 5"), std::string::npos)
        << e.what();
  }
}

TEST_F(DistTest, BarrierCompletes) {
  WorkPtr w = world().barrier();
  w->wait();
  EXPECT_TRUE(w->is_completed());
  EXPECT_EQ(w->error(), nullptr);
}

TEST_F(DistTest, EmptyTensorsAreFine) {
  Tensor t = Tensor::empty({0});
  world().all_reduce(t)->wait();
  Tensor out = Tensor::empty({0});
  world().all_gather(Tensor::empty({0}), out)->wait();
  SUCCEED();
}

}  // namespace
}  // namespace braid::dist::testing
