// The transport under NcclProcessGroup (internal): what moves device buffers between the ranks of
// a group, each call enqueued on a CUDA stream. NcclProcessGroup does everything above it (the
// operation engine, streams and events, staging, checks). Two implementations: NCCL
// (nccl_transport.cpp) and a stand-in that runs the same collectives over MPI on host copies
// (standin_transport.cpp), so the code above runs in CPU CI on the emulated device.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "braid/core/dtype.h"
#include "braid/dist/process_group.h"
#include "dist/mpi_ring.h"

namespace braid::dist::detail {

// What a call may wait on: a non-blocking NCCL call is polled until `deadline`; the stand-in's MPI
// transfer until keep_waiting() turns false (the group failed), when it gives up (RingAbandoned).
struct CallContext {
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout;
  const KeepWaiting& keep_waiting;
};

class CommTransport {
 public:
  virtual ~CommTransport() = default;
  // "nccl", "stand-in (MPI)": for messages.
  virtual std::string_view kind() const = 0;

  // NCCL's shapes: reduce_scatter receives `count` elements per rank from count * size;
  // all_gather sends `count` and receives count * size. send == recv is in place.
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                          cudaStream_t stream, const CallContext& ctx) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                              cudaStream_t stream, const CallContext& ctx) = 0;
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype,
                          cudaStream_t stream, const CallContext& ctx) = 0;
  virtual void broadcast(void* buffer, size_t count, DType dtype, int root, cudaStream_t stream,
                         const CallContext& ctx) = 0;
  virtual void send(const void* buffer, size_t count, DType dtype, int peer, cudaStream_t stream,
                    const CallContext& ctx) = 0;
  virtual void recv(void* buffer, size_t count, DType dtype, int peer, cudaStream_t stream,
                    const CallContext& ctx) = 0;

  // An error the transport raised on its own (a peer died), or "".
  virtual std::string async_error() = 0;
  // Makes whatever is enqueued return; the transport is unusable afterwards. Idempotent.
  virtual void abort() = 0;
  // Releases the communicator cleanly, aborting instead when `deadline` passes first.
  virtual void finalize(std::chrono::steady_clock::time_point deadline) = 0;
  // Collective over this transport's ranks: the transport of `sub` (MPI_Comm_split's result for
  // this rank, null when it joins no group), ordered like `sub`. Null for ranks joining none.
  virtual std::unique_ptr<CommTransport> split(const ProcessGroupPtr& sub, int color, int device,
                                               const std::string& name,
                                               std::chrono::steady_clock::time_point deadline) = 0;
};

// Collective over `bootstrap`: a transport for its ranks on cuda:`device`.
// The build's own: NCCL where braid was built with it, the stand-in on the emulated device.
std::unique_ptr<CommTransport> make_default_transport(const ProcessGroupPtr& bootstrap, int device,
                                                      const std::string& name);
// The stand-in over MPI (standin_transport.cpp). `bootstrap` is an MPI process group, or any
// one-rank group.
std::unique_ptr<CommTransport> make_standin_transport(const ProcessGroupPtr& bootstrap, int device,
                                                      const std::string& name);

}  // namespace braid::dist::detail
