// Ring reduce-scatter and all-gather over non-blocking point-to-point messages (internal); the
// MPI backend's all_reduce is one of each, in place.
//
// Why not MPI's collectives: on this project's Open MPI (4.1) the ring reduce_scatter is faster
// than MPI_Reduce_scatter from 1 MiB up, and the ring all_gather and all_reduce keep level with
// MPI_Allgatherv and MPI_Allreduce (benchmarks/collectives, docs/performance.md). Above all a
// polled ring can be abandoned: a rank whose group timed out stops waiting and reports, where
// a thread blocked inside an MPI collective cannot be released.
//
// Chunk i of a buffer of `total` elements is chunk_size(total, size, i) elements at
// chunk_offset(total, size, i) (process_group.h). The ring runs size - 1 steps; in each, a rank
// sends to rank + 1 and receives from rank - 1 (mod size). Reduction order is fixed: chunk i is
// folded left to right starting at rank i + 1, ((x[i+1] + x[i+2]) + ...) + x[i], so a result
// depends only on the inputs and the group size, never on timing.
//
// Every rank of the communicator must run the same ring operations in the same order, one at a
// time (the group's progress thread guarantees both); the communicator must carry nothing else.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>

#include "braid/core/dtype.h"
#include "braid/core/error.h"
#include "braid/dist/process_group.h"

namespace braid::dist::detail {

// Polled between tests of the outstanding requests; false means the group failed and the ring
// must stop waiting. It then cancels its receives, hands its requests back to MPI, leaves its
// buffers allocated (a late message may still land in them) and throws braid::Error.
using KeepWaiting = std::function<bool()>;

// Thrown by a ring that stopped waiting because keep_waiting() said so. MPI may still write into
// the operation's buffers, so whoever holds them must never free them.
class RingAbandoned : public Error {
 public:
  using Error::Error;
};

// out[chunk rank] = the reduction over ranks of in[chunk rank]. dtype: f32, i32, i64 or u8 (avg
// is a sum here; the caller divides). Integer sums wrap. `out` must not overlap `in` except as
// exactly in's own chunk (in place).
void ring_reduce_scatter(const void* in, void* out, int64_t total, DType dtype, ReduceOp op,
                         MPI_Comm comm, const KeepWaiting& keep_waiting);

// out = every rank's `in` (its chunk) in rank order. Any dtype (moved as bytes). `in` may be
// out's own chunk (in place); otherwise it must not overlap `out`.
void ring_all_gather(const void* in, void* out, int64_t total, DType dtype, MPI_Comm comm,
                     const KeepWaiting& keep_waiting);

}  // namespace braid::dist::detail
