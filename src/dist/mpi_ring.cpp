// Ring reduce-scatter and all-gather: each step posts one receive and one send, polls them, and
// for a reduction folds the received partial sum into this rank's chunk.
#include "dist/mpi_ring.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>

#include "dist/mpi_runtime.h"

namespace braid::dist::detail {
namespace {

constexpr int kRingTag = 1;
constexpr int kSpinsBeforeYield = 64;

// Elements travel as unsigned words of their size: the ring does its own arithmetic.
MPI_Datatype word_type(size_t bytes) {
  switch (bytes) {
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    case 8:
      return MPI_UINT64_T;
  }
  BRAID_FAIL("ring collectives move 1, 2, 4 or 8-byte elements, not {}-byte ones", bytes);
}

class RingStep {
 public:
  RingStep(MPI_Comm comm, int rank, int size, DType dtype)
      : comm_(comm),
        next_((rank + 1) % size),
        prev_((rank + size - 1) % size),
        type_(word_type(dtype_size(dtype))) {}

  void post(void* recv_into, int64_t recv_count, const void* send_from, int64_t send_count) {
    BRAID_MPI_CHECK(MPI_Irecv(recv_into, static_cast<int>(recv_count), type_, prev_, kRingTag,
                              comm_, &requests_[0]));
    BRAID_MPI_CHECK(MPI_Isend(send_from, static_cast<int>(send_count), type_, next_, kRingTag,
                              comm_, &requests_[1]));
  }

  // One non-blocking test, which also lets MPI move the step along: true once both are done.
  bool test() {
    int done = 0;
    BRAID_MPI_CHECK(MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE));
    return done != 0;
  }

  // Tests until both requests are done. `leak` holds buffers the requests may still use, which
  // are given up (never freed) when the group fails mid-step.
  void wait(const KeepWaiting& keep_waiting, std::unique_ptr<std::byte[]>& leak) {
    for (int spins = 0;; spins = std::min(spins + 1, kSpinsBeforeYield)) {
      if (test()) return;
      if (!keep_waiting()) abandon(leak);
      // A peer that has not arrived yet is usually still computing: after a short spin, let the
      // compute threads of this core run between tests (as Open MPI does when oversubscribed).
      if (spins == kSpinsBeforeYield) std::this_thread::yield();
    }
  }

 private:
  [[noreturn]] void abandon(std::unique_ptr<std::byte[]>& leak) {
    if (requests_[0] != MPI_REQUEST_NULL) MPI_Cancel(&requests_[0]);
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    leak.release();  // NOLINT(bugprone-unused-return-value): deliberately never freed
    throw RingAbandoned("a ring step was abandoned because its group failed");
  }

  MPI_Comm comm_;
  int next_, prev_;
  MPI_Datatype type_;
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

template <class T>
T combine(T partial, T mine, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      if constexpr (std::is_integral_v<T>) {
        // Integer sums wrap like MPI's, without signed-overflow undefined behaviour.
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(partial) + static_cast<U>(mine));
      } else {
        return partial + mine;
      }
    case ReduceOp::max:
      return std::max(partial, mine);
    case ReduceOp::min:
      return std::min(partial, mine);
  }
  return partial;
}

// dst[i] = combine(partial[i], mine[i]); the switch sits outside the loop so the loop vectorises.
template <class T>
void fold(const void* partial_v, const void* mine_v, void* dst_v, int64_t n, ReduceOp op) {
  const T* partial = static_cast<const T*>(partial_v);
  const T* mine = static_cast<const T*>(mine_v);
  T* dst = static_cast<T*>(dst_v);
  auto loop = [&](ReduceOp o) {
    for (int64_t i = 0; i < n; ++i) dst[i] = combine(partial[i], mine[i], o);
  };
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return loop(ReduceOp::sum);
    case ReduceOp::max:
      return loop(ReduceOp::max);
    case ReduceOp::min:
      return loop(ReduceOp::min);
  }
}

void fold(DType dtype, const void* partial, const void* mine, void* dst, int64_t n, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return fold<float>(partial, mine, dst, n, op);
    case DType::i32:
      return fold<int32_t>(partial, mine, dst, n, op);
    case DType::i64:
      return fold<int64_t>(partial, mine, dst, n, op);
    case DType::u8:
      return fold<uint8_t>(partial, mine, dst, n, op);
    case DType::bf16:
    case DType::f16:
      break;
  }
  BRAID_FAIL("the ring reduces f32, i32, i64 and u8; {} must be widened to f32 first",
             dtype_name(dtype));
}

int wrap(int i, int size) {
  return ((i % size) + size) % size;
}

}  // namespace

void ring_reduce_scatter(const void* in, void* out, int64_t total, DType dtype, ReduceOp op,
                         MPI_Comm comm, const KeepWaiting& keep_waiting) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  const size_t esize = dtype_size(dtype);
  const auto* base = static_cast<const std::byte*>(in);
  auto chunk = [&](int i) { return base + chunk_offset(total, size, wrap(i, size)) * esize; };
  auto count = [&](int i) { return chunk_size(total, size, wrap(i, size)); };
  if (size == 1) {
    std::memmove(out, in, static_cast<size_t>(total) * esize);
    return;
  }
  // Two receive buffers alternate: step s receives into one while sending the partial sum that
  // step s - 1 folded into the other.
  const int64_t largest = chunk_size(total, size, 0);
  std::unique_ptr<std::byte[]> work(new std::byte[2 * largest * esize]);
  std::byte* buffers[2] = {work.get(), work.get() + largest * esize};
  RingStep step(comm, rank, size, dtype);
  const void* send = chunk(rank - 1);
  int64_t send_count = count(rank - 1);
  for (int s = 0; s < size - 1; ++s) {
    const int arriving = rank - s - 2;  // the chunk whose partial sum comes from rank - 1
    std::byte* received = buffers[s % 2];
    step.post(received, count(arriving), send, send_count);
    step.wait(keep_waiting, work);
    void* dst = s == size - 2 ? out : received;  // the last step yields this rank's own chunk
    fold(dtype, received, chunk(arriving), dst, count(arriving), op);
    send = dst;
    send_count = count(arriving);
  }
}

// Copies `bytes` from `from` to `to` in slices with a test of the step before each. Open MPI's
// shared-memory transport moves a large message inside the receiver's test, so testing first
// pulls the arriving chunk at once and the copy then overlaps the peer pulling ours. Copying
// first and testing after left the all_gather behind MPI_Allgatherv, most at large messages;
// in slices it keeps level (benchmarks/collectives).
void copy_while_progressing(RingStep& step, const void* from, void* to, size_t bytes) {
  constexpr size_t kSlice = size_t{256} << 10;
  for (size_t offset = 0; offset < bytes; offset += kSlice) {
    step.test();
    std::memcpy(static_cast<std::byte*>(to) + offset, static_cast<const std::byte*>(from) + offset,
                std::min(kSlice, bytes - offset));
  }
}

void ring_all_gather(const void* in, void* out, int64_t total, DType dtype, MPI_Comm comm,
                     const KeepWaiting& keep_waiting) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  const size_t esize = dtype_size(dtype);
  auto* base = static_cast<std::byte*>(out);
  auto chunk = [&](int i) { return base + chunk_offset(total, size, wrap(i, size)) * esize; };
  auto count = [&](int i) { return chunk_size(total, size, wrap(i, size)); };
  const bool in_place = in == chunk(rank);
  std::unique_ptr<std::byte[]> nothing_to_leak;
  RingStep step(comm, rank, size, dtype);
  for (int s = 0; s < size - 1; ++s) {
    // Step 0 sends this rank's chunk straight from `in` and copies it into place meanwhile.
    const void* send = s == 0 ? in : chunk(rank - s);
    step.post(chunk(rank - s - 1), count(rank - s - 1), send, count(rank - s));
    if (s == 0 && !in_place) copy_while_progressing(step, in, chunk(rank), count(rank) * esize);
    step.wait(keep_waiting, nothing_to_leak);
  }
  if (size == 1 && !in_place) std::memcpy(chunk(rank), in, count(rank) * esize);
}

}  // namespace braid::dist::detail
