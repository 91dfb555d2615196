// The MPI backend of ProcessGroup, for CPU tensors: a private communicator per group, and the
// shared operation engine's progress thread running the group's operations in issue order, so
// compute overlaps them.
//
// Semantics beyond process_group.h:
// - Tensors must live on the CPU and be dense (is_contiguous()); anything else throws at issue
//   time. CUDA tensors belong to the NCCL backend. Pass a dense copy and copy results back.
// - Algorithms: all_reduce, reduce_scatter and all_gather are braid's own ring over
//   point-to-point messages on a second private communicator (all_reduce is a reduce_scatter
//   into each rank's chunk, then an all_gather, in place): faster than or level with Open MPI's
//   (benchmarks/collectives, docs/performance.md), and polled, so a timed-out rank stops waiting
//   instead of staying blocked inside MPI. Chunk i is folded from rank i + 1 onward,
//   ((x[i+1] + x[i+2]) + ...) + x[i]: a fixed order for a given group size, the same in
//   all_reduce and reduce_scatter. broadcast, barrier and split are MPI's blocking calls.
// - Starting: a wait() on the next operation runs its ring on the caller's thread. Otherwise
//   an operation starts as soon as the progress thread is free, with one exception: when the
//   last one of the same kind and size was waited for at once, the idle thread is not woken
//   for it (that costs a context switch per operation); if no wait() claims it, it starts
//   with the next issue or within ~2 ms.
// - dtypes: f32, i32, i64 and u8 are reduced as themselves. bf16 and f16 are widened to f32,
//   reduced in f32 and rounded to nearest-even once at the end, so the result is the f32 result
//   correctly rounded, never a reduction of the raw bits. avg divides the f32 sum by size()
//   before that single rounding. For integers avg is the sum divided by size() with C++
//   truncation toward zero; integer sums wrap (u8 modulo 256).
// - all_gather, broadcast, send and recv move bf16/f16 as raw 16-bit words (no rounding).
// - Timeouts: an operation that has not finished timeout() after it started makes the group
//   fail; the stored error of every outstanding Work names the group, op, sequence number and
//   the ranks that never joined (asked over a separate control channel, see bootstrap.h), and
//   the last collectives of this rank are written to the log. A failed group stays failed:
//   later operations return Works holding the same error. The process should then end
//   (braid::dist::abort_job) since the peers are in an unknown state.
// - send/recv are posted non-blocking in issue order, so a send issued before a recv on both
//   sides of a ring cannot deadlock; their Works still complete in issue order.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "braid/dist/process_group.h"

namespace braid::dist {

namespace detail {
class OpEngine;
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  // Collective over `comm` (every member calls it, ordered like any collective on `comm`).
  // `comm` is duplicated, so braid's traffic never mixes with the caller's, who keeps
  // ownership of `comm`. Requires braid::dist::init(). The timeout starts at
  // default_collective_timeout().
  MpiProcessGroup(MPI_Comm comm, std::string name);
  // Lets outstanding operations finish (bounded by the timeout), then frees the communicator.
  ~MpiProcessGroup() override;
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) override;
  WorkPtr reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op = ReduceOp::sum) override;
  WorkPtr all_gather(const Tensor& input, Tensor& output) override;
  WorkPtr broadcast(Tensor& tensor, int root) override;
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0) override;
  WorkPtr recv(Tensor& tensor, int src, int tag = 0) override;
  WorkPtr barrier() override;
  // MPI_Comm_split on this group's communicator, run as one of its collectives (it takes a
  // sequence number, so a rank that skips it is diagnosed like any other); blocks until done.
  // color < 0: this rank joins no group and gets nullptr. The new group inherits the timeout.
  std::shared_ptr<ProcessGroup> split_by_color(int color, int key, std::string name) override;

  std::string backend() const override { return "mpi"; }

  // The group's private communicator, e.g. for comparing against raw MPI. Use it only while
  // none of this group's operations is outstanding.
  MPI_Comm comm() const;

 private:
  struct Adopt {};
  // Takes ownership of `owned` (already private to braid, e.g. from a split).
  MpiProcessGroup(Adopt, MPI_Comm owned, std::string name, std::chrono::milliseconds timeout);

  MPI_Comm comm_ = MPI_COMM_NULL;       // the group's own (broadcast, barrier, split, send/recv)
  MPI_Comm ring_comm_ = MPI_COMM_NULL;  // braid's ring collectives only (mpi_ring.h)
  std::shared_ptr<detail::OpEngine> engine_;  // queue, progress thread, timeouts (op_engine.h)
};

}  // namespace braid::dist
