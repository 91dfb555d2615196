// The NCCL backend of ProcessGroup, for CUDA tensors: one communicator and one dedicated CUDA
// stream per group, ordered against the compute stream with events, on the shared operation
// engine (src/dist/op_engine.h: sequence numbers, the collective log, the watchdog).
//
// Plain C++ (no NCCL or CUDA headers), so host code of a CUDA build can include it. Built when
// CMake found NCCL >= 2.14 (targets linking `braid_nccl` then get BRAID_WITH_NCCL defined), and
// in the emulated-device variant (braid_simt) over the stand-in transport.
//
// Transports (kernels/dist/comm_transport.h): NCCL, or a stand-in that runs the same collectives
// over MPI on host copies of the device buffers, keeping the stream semantics below (each call
// blocks its issuing thread until its transfer is done, as every stream operation does on the
// emulated device). create() takes the build's own (NCCL; the stand-in in the emulated variant),
// create_standin() the stand-in anywhere.
//
// Semantics beyond process_group.h:
// - Tensors must live on cuda:device() and be dense; CPU tensors throw at issue time (they go to
//   the MPI backend). dtypes: f32, bf16, f16, i32, i64, u8.
// - Streams: an operation first makes the group's stream wait for everything the caller issued
//   before it on braid::cuda::current_stream() (an event), then runs on the group's stream and
//   records a completion event there. Compute keeps running meanwhile.
// - Work::wait() does NOT block the host: it makes the caller's current stream wait for the
//   completion event, then throws the error known so far. Everything braid issues afterwards on
//   that stream, including copies to the host, sees the result. NcclWork::synchronize() (and
//   NcclProcessGroup::synchronize()) block the host. barrier()'s wait() blocks the host too, as a
//   barrier is only useful that way. is_completed() asks the completion event.
// - Reductions (NCCL) run in NCCL's order and in the tensor's dtype: bf16/f16 round after every
//   addition (the MPI backend widens to f32 and rounds once), so multi-rank results can differ
//   from the MPI backend's by a few ulps. avg is ncclAvg: floating types multiply every input by
//   1/size() before summing (not sum then divide); integers sum, then divide truncating toward
//   zero, u8 sums wrapping modulo 256 as in the MPI backend. The stand-in reduces exactly like
//   the MPI backend (its ring order, f32 widening, sum then divide).
// - reduce_scatter / all_gather keep chunk_size() / chunk_offset() exactly. NCCL needs equal
//   chunks, so when size() does not divide the element count the data goes through a staging
//   buffer of size() * ceil(count / size()) elements (stream-ordered scratch memory on the
//   group's stream) with two extra device copies on each side; divisible counts use the caller's
//   buffers directly. Overlapping input and output (other than NCCL's in-place layout) also
//   stage the input.
// - send/recv: matched per peer in issue order; the tag is checked locally but not sent, so each
//   pair of ranks must issue its transfers in the same order. A send occupies the group's stream
//   until the peer posts the matching recv (and a recv until the send), so two ranks that both
//   send first deadlock: in a ring, let even ranks send first and odd ranks receive first.
//   Sending to oneself is rejected.
// - Timeouts: an operation's clock starts when the group's stream reaches it (work queued behind
//   compute does not count). One still running timeout() later fails the group with the same
//   diagnosis as the MPI backend: asked over the control channel (MPI up), the peers say where
//   they are, and the error names group, op, sequence number and the ranks that never joined
//   (without MPI, a one-rank group over a SoloProcessGroup, it says no peer could be asked). An
//   error reported by ncclCommGetAsyncError or CUDA fails the group too. Failing aborts the
//   transport (ncclCommAbort), stores the error in every outstanding Work and writes the
//   collective log to braid::log(). A failed group stays failed: later operations return Works
//   holding the same error, and the job should end (braid::dist::abort_job).
// - Lifetime: a tensor passed in is kept alive until its operation completed on the device, and
//   released on a later issuing (or synchronizing) thread, never on the engine's thread.
#pragma once

#include <memory>
#include <string>

#include "braid/dist/parallel_grid.h"
#include "braid/dist/process_group.h"

namespace braid::dist {

namespace detail {
class CommTransport;
}

// The Work of an NCCL operation; wait() orders the caller's stream (see above).
class NcclWork : public Work {
 public:
  // Blocks the host until the operation finished on the device or failed (bounded by the group's
  // timeout through the watchdog), then throws its error if any.
  virtual void synchronize() = 0;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  // Collective over `mpi_group` (every member calls it, ordered like any collective on that
  // group): its rank 0 draws an ncclUniqueId and broadcasts it over `mpi_group` (any group that
  // can broadcast a CPU tensor: the MPI backend, or a SoloProcessGroup for one rank), then every
  // rank creates its communicator on cuda:`device` without blocking (ncclCommInitRankConfig,
  // blocking = 0) and polls it until it is ready. A communicator not ready within
  // mpi_group->timeout() is aborted and the error names the group and its number of ranks. The
  // new group has mpi_group's ranks, order and timeout; each process drives one device, and two
  // ranks of one group cannot share a device (NCCL refuses).
  static std::shared_ptr<NcclProcessGroup> create(ProcessGroupPtr mpi_group, int device,
                                                  std::string name);
  // The same over the stand-in transport (MPI on host copies; `mpi_group` must be an MPI group,
  // or have one rank). Several ranks may then share one device.
  static std::shared_ptr<NcclProcessGroup> create_standin(ProcessGroupPtr mpi_group, int device,
                                                          std::string name);
  // Waits for the outstanding operations (bounded by the timeout), then releases the
  // communicator: ncclCommFinalize + ncclCommDestroy, or ncclCommAbort when the group failed or
  // finalising does not finish within the timeout (a peer that never destroys its side).
  ~NcclProcessGroup() override;
  NcclProcessGroup(const NcclProcessGroup&) = delete;
  NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) override;
  WorkPtr reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op = ReduceOp::sum) override;
  WorkPtr all_gather(const Tensor& input, Tensor& output) override;
  WorkPtr broadcast(Tensor& tensor, int root) override;
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0) override;
  WorkPtr recv(Tensor& tensor, int src, int tag = 0) override;
  // An all_reduce of one element; its Work's wait() blocks the host.
  WorkPtr barrier() override;
  // Collective over this group: splits the underlying MPI group with the same color and key
  // (MPI_Comm_split semantics; color < 0 gets nullptr), then derives the new communicator with
  // ncclCommSplit (NCCL >= 2.18, keyed by the new MPI rank so both orders agree) or, with older
  // NCCL, bootstraps a new one over the MPI subgroup. Blocks until the new communicator is ready.
  // The new group inherits this group's device and timeout.
  std::shared_ptr<ProcessGroup> split_by_color(int color, int key, std::string name) override;

  std::string backend() const override { return "nccl"; }

  // The CUDA device this group communicates from.
  int device() const { return device_; }
  // The transport's name: "nccl" or "stand-in (MPI)".
  std::string transport() const;
  // The group that bootstrapped this one (and carries split_by_color's MPI side).
  const ProcessGroupPtr& mpi_group() const { return mpi_group_; }
  // Blocks the host until every operation issued so far has finished, then throws the group's
  // error if it failed.
  void synchronize();

 private:
  using TransportFactory = std::unique_ptr<detail::CommTransport> (*)(
      const ProcessGroupPtr& bootstrap, int device, const std::string& name);
  static std::shared_ptr<NcclProcessGroup> create_with(ProcessGroupPtr mpi_group, int device,
                                                       std::string name, TransportFactory factory);
  NcclProcessGroup(ProcessGroupPtr mpi_group, int device, std::string name,
                   std::unique_ptr<detail::CommTransport> transport);

  struct State;
  ProcessGroupPtr mpi_group_;
  int device_;
  std::unique_ptr<State> state_;
};

// For ParallelGrid(world, axes, Device::cuda(device), nccl_group_factory(device)): one
// NcclProcessGroup per axis on cuda:`device` (the build's transport), bootstrapped over the
// axis's MPI group and named after the axis.
DeviceGroupFactory nccl_group_factory(int device);

}  // namespace braid::dist
