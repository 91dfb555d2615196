// Two-rank checks of the NCCL backend against closed-form answers, run as
// `mpirun -np 2 braid_nccl_multi_rank` (ctest: gpu.nccl_multi_rank.np2). Exits 77 (ctest: skipped)
// unless there are at least two ranks and each rank of a node has a GPU of its own.
//
// Rank r holds (r + 1) * k with k = i % 7 + 1, so over R ranks sum = k * R(R+1)/2, max = R * k,
// min = k; every value is a small integer, exact in every dtype and after NCCL's 1/R
// pre-multiplication for float avg when R = 2, so all comparisons are exact.
//
// tests/CMakeLists.txt globs this file into braid_test_gpu too; there it compiles to nothing,
// since only the braid_nccl_multi_rank target defines BRAID_NCCL_MULTI_RANK_MAIN.
#ifdef BRAID_NCCL_MULTI_RANK_MAIN

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "braid/core/tensor.h"
#include "braid/dist/bootstrap.h"
#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"

namespace braid::dist {
namespace {

constexpr int kSkip = 77;

int g_rank = 0;
int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "[rank %d] FAILED: %s\n", g_rank, what.c_str());
}

// Runs one named check; an exception counts as its failure.
void run(const char* name, const std::function<void()>& body) {
  const int before = g_failures;
  try {
    body();
  } catch (const std::exception& e) {
    expect(false, fmt::format("{} threw: {}", name, e.what()));
  }
  if (g_rank == 0) std::printf("[%s] %s\n", g_failures == before ? "  OK  " : "FAILED", name);
}

Tensor host_tensor(const std::vector<double>& values, DType dtype) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    void* p = t.data_ptr();
    switch (dtype) {
      case DType::f32:
        static_cast<float*>(p)[i] = static_cast<float>(v);
        break;
      case DType::bf16:
        static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v));
        break;
      case DType::f16:
        static_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v));
        break;
      case DType::i32:
        static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
        break;
      case DType::i64:
        static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
        break;
      case DType::u8:
        static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
        break;
    }
  }
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  std::vector<double> out(static_cast<size_t>(h.numel()));
  const void* p = h.data_ptr();
  for (size_t i = 0; i < out.size(); ++i) {
    switch (h.dtype()) {
      case DType::f32:
        out[i] = static_cast<const float*>(p)[i];
        break;
      case DType::bf16:
        out[i] = bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
        break;
      case DType::f16:
        out[i] = f16_to_f32(static_cast<const uint16_t*>(p)[i]);
        break;
      case DType::i32:
        out[i] = static_cast<const int32_t*>(p)[i];
        break;
      case DType::i64:
        out[i] = static_cast<double>(static_cast<const int64_t*>(p)[i]);
        break;
      case DType::u8:
        out[i] = static_cast<const uint8_t*>(p)[i];
        break;
    }
  }
  return out;
}

double k_of(int64_t i) {
  return static_cast<double>(i % 7 + 1);
}

// Rank r's contribution at global index i.
std::vector<double> contribution(int rank, int64_t begin, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (rank + 1) * k_of(begin + i);
  return v;
}

double reduced(ReduceOp op, DType dtype, int size, int64_t i) {
  const double k = k_of(i);
  const double sum = k * size * (size + 1) / 2;
  switch (op) {
    case ReduceOp::sum:
      return sum;
    case ReduceOp::avg:
      // Integers divide the sum truncating toward zero; floats are exact here.
      return is_floating(dtype) ? sum / size : std::trunc(sum / size);
    case ReduceOp::max:
      return k * size;
    case ReduceOp::min:
      return k;
  }
  return 0;
}

std::string first_mismatch(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return fmt::format("size {} != {}", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return fmt::format("[{}] = {}, expected {}", i, got[i], want[i]);
  return "";
}

void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  const std::string mismatch = first_mismatch(values_of(t), want);
  expect(mismatch.empty(), what + ": " + mismatch);
}

const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};

void check_all_reduce(NcclProcessGroup& g) {
  const int64_t n = 1000;
  for (DType dtype : kDtypes) {
    for (ReduceOp op : kOps) {
      Tensor t = host_tensor(contribution(g.rank(), 0, n), dtype).to(Device::cuda(g.device()));
      g.all_reduce(t, op)->wait();
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = reduced(op, dtype, g.size(), i);
      expect_values(t, want,
                    fmt::format("all_reduce {} {}", dtype_name(dtype), reduce_op_name(op)));
    }
  }
}

// Totals divisible by the group size use the caller's buffers; the others the padded staging.
void check_reduce_scatter(NcclProcessGroup& g) {
  for (int64_t total : {12, 11, 1, 0}) {
    for (DType dtype : {DType::f32, DType::bf16, DType::i64, DType::u8}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        const Device dev = Device::cuda(g.device());
        const Tensor in = host_tensor(contribution(g.rank(), 0, total), dtype).to(dev);
        const int64_t mine = chunk_size(total, g.size(), g.rank());
        const int64_t offset = chunk_offset(total, g.size(), g.rank());
        Tensor out = Tensor::empty({mine}, dtype, dev);
        g.reduce_scatter(in, out, op)->wait();
        std::vector<double> want(mine);
        for (int64_t i = 0; i < mine; ++i) want[i] = reduced(op, dtype, g.size(), offset + i);
        expect_values(out, want,
                      fmt::format("reduce_scatter {} {} of {}", dtype_name(dtype),
                                  reduce_op_name(op), total));
      }
    }
  }
}

void check_all_gather(NcclProcessGroup& g) {
  for (int64_t total : {12, 11, 1, 0}) {
    for (DType dtype : {DType::f32, DType::f16, DType::i32, DType::u8}) {
      const Device dev = Device::cuda(g.device());
      const int64_t mine = chunk_size(total, g.size(), g.rank());
      const int64_t offset = chunk_offset(total, g.size(), g.rank());
      // Element i of the result comes from the rank owning it: (owner + 1) * k(i).
      const Tensor in = host_tensor(contribution(g.rank(), offset, mine), dtype).to(dev);
      Tensor out = Tensor::empty({total}, dtype, dev);
      g.all_gather(in, out)->wait();
      std::vector<double> want(total);
      for (int r = 0; r < g.size(); ++r)
        for (int64_t i = 0; i < chunk_size(total, g.size(), r); ++i) {
          const int64_t at = chunk_offset(total, g.size(), r) + i;
          want[at] = (r + 1) * k_of(at);
        }
      expect_values(out, want, fmt::format("all_gather {} of {}", dtype_name(dtype), total));
    }
  }
}

void check_broadcast(NcclProcessGroup& g) {
  for (int root = 0; root < g.size(); ++root) {
    Tensor t =
        host_tensor(contribution(g.rank(), 0, 257), DType::bf16).to(Device::cuda(g.device()));
    g.broadcast(t, root)->wait();
    expect_values(t, contribution(root, 0, 257), fmt::format("broadcast from {}", root));
  }
}

// Even ranks send first, odd ranks receive first: a send holds the group's stream until it is
// matched, so both sending first would deadlock (see nccl_process_group.h).
void check_send_recv(NcclProcessGroup& g) {
  const int peer = g.rank() ^ 1;
  if (peer >= g.size()) return;
  const Device dev = Device::cuda(g.device());
  const Tensor mine = host_tensor(contribution(g.rank(), 0, 100), DType::f32).to(dev);
  Tensor theirs = Tensor::empty({100}, DType::f32, dev);
  WorkPtr a, b;
  if (g.rank() % 2 == 0) {
    a = g.send(mine, peer, 5);
    b = g.recv(theirs, peer, 5);
  } else {
    a = g.recv(theirs, peer, 5);
    b = g.send(mine, peer, 5);
  }
  a->wait();
  b->wait();
  expect_values(theirs, contribution(peer, 0, 100), "send/recv");
}

void check_barrier_and_works(NcclProcessGroup& g) {
  Tensor t =
      host_tensor(contribution(g.rank(), 0, 1 << 20), DType::f32).to(Device::cuda(g.device()));
  WorkPtr work = g.all_reduce(t, ReduceOp::sum);
  dynamic_cast<NcclWork&>(*work).synchronize();
  expect(work->is_completed(), "is_completed after synchronize");
  expect(work->error() == nullptr, "no error after synchronize");
  WorkPtr barrier = g.barrier();
  barrier->wait();
  expect(barrier->is_completed(), "barrier's wait blocks the host");
  g.synchronize();
}

void check_split(NcclProcessGroup& g) {
  // Everyone in one group, order reversed by key.
  auto reversed = g.split_by_color(0, g.size() - 1 - g.rank(), "reversed");
  expect(reversed != nullptr, "split: member got a group");
  if (reversed) {
    expect(reversed->rank() == g.size() - 1 - g.rank(), "split: ordered by key");
    auto& r = static_cast<NcclProcessGroup&>(*reversed);
    const Device dev = Device::cuda(g.device());
    // Each rank contributes its new rank; all_gather must return 0, 1, ... in new-rank order.
    const Tensor in = host_tensor({static_cast<double>(r.rank())}, DType::i32).to(dev);
    Tensor out = Tensor::empty({r.size()}, DType::i32, dev);
    r.all_gather(in, out)->wait();
    std::vector<double> want(r.size());
    for (int i = 0; i < r.size(); ++i) want[i] = i;
    expect_values(out, want, "split: NCCL order matches MPI order");
  }
  // Each rank alone.
  auto alone = g.split_by_color(g.rank(), 0, "alone");
  expect(alone != nullptr && alone->size() == 1, "split: singleton groups");
  // Only rank 0 joins.
  auto only0 = g.split_by_color(g.rank() == 0 ? 0 : -1, 0, "only0");
  expect((only0 != nullptr) == (g.rank() == 0), "split: color < 0 gets nullptr");
}

// Last: rank 1 skips a collective on a group with a 3 s timeout; rank 0's Work must fail with the
// engine's diagnosis: group, op, sequence number and the rank that never joined.
void check_timeout(const std::shared_ptr<NcclProcessGroup>& world) {
  auto group = std::static_pointer_cast<NcclProcessGroup>(world->split_by_color(0, 0, "doomed"));
  group->set_timeout(std::chrono::seconds(3));
  const Device dev = Device::cuda(group->device());
  Tensor t = host_tensor(contribution(group->rank(), 0, 16), DType::f32).to(dev);
  group->all_reduce(t)->wait();  // seq 1, joined by both
  if (group->rank() == 0) {
    WorkPtr work = group->all_reduce(t);  // seq 2, never joined by rank 1
    std::string message;
    try {
      dynamic_cast<NcclWork&>(*work).synchronize();
    } catch (const std::exception& e) {
      message = e.what();
    }
    for (const char* part :
         {"collective timed out", "group 'doomed' (nccl, 2 ranks)", "all_reduce seq 2",
          "never joined: rank 1 [last issued seq 1, started seq 1]"})
      expect(message.find(part) != std::string::npos,
             fmt::format("timeout message lacks '{}': '{}'", part, message));
    // The group stays failed.
    expect(group->all_reduce(t)->error() != nullptr, "a failed group fails later operations");
  }
  // Destroying rank 1's side must not hang for long (finalize is bounded by the 3 s timeout).
  group.reset();
  environment().world()->barrier()->wait();
}

}  // namespace
}  // namespace braid::dist

int main(int argc, char** argv) {
  using namespace braid::dist;
  try {
    Environment& env = init(&argc, &argv);
    g_rank = env.world_rank();
    // Decided together, so that no rank waits for a peer that skipped.
    const int usable =
        env.world_size() >= 2 && braid::cuda::device_count() >= env.local_size() ? 1 : 0;
    braid::Tensor flag = braid::Tensor::from_vector(std::vector<int32_t>{usable}, {1});
    env.world()->all_reduce(flag, ReduceOp::min)->wait();
    if (flag.data<int32_t>()[0] == 0) {
      if (g_rank == 0)
        std::printf("SKIPPED: needs >= 2 ranks and one GPU per rank (world %d, %d GPU(s) here)\n",
                    env.world_size(), braid::cuda::device_count());
      finalize();
      return kSkip;
    }
    braid::cuda::ensure_registered();
    auto world = NcclProcessGroup::create(env.world(), env.local_rank(), "nccl-world");
    run("all_reduce: every dtype and op", [&] { check_all_reduce(*world); });
    run("reduce_scatter: even and padded sizes", [&] { check_reduce_scatter(*world); });
    run("all_gather: even and padded sizes", [&] { check_all_gather(*world); });
    run("broadcast: every root", [&] { check_broadcast(*world); });
    run("send/recv: alternating order", [&] { check_send_recv(*world); });
    run("barrier, synchronize, is_completed", [&] { check_barrier_and_works(*world); });
    run("split_by_color", [&] { check_split(*world); });
    run("timeout of a skipped collective", [&] { check_timeout(world); });
    world.reset();
    // Every rank's verdict, so mpirun fails when any rank failed.
    braid::Tensor failed = braid::Tensor::from_vector(std::vector<int32_t>{g_failures}, {1});
    env.world()->all_reduce(failed, ReduceOp::sum)->wait();
    const int total = failed.data<int32_t>()[0];
    if (g_rank == 0)
      std::printf("%s (%d failure(s) over all ranks)\n", total ? "FAILED" : "PASSED", total);
    finalize();
    return total == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", g_rank, e.what());
    abort_job(1);
  }
}

#endif  // BRAID_NCCL_MULTI_RANK_MAIN
