// Host-side pieces of NcclProcessGroup that need neither NCCL nor a device (so tests check them
// anywhere and the stand-in transport shares them): argument checks, the padded-chunk plan of
// uneven reduce_scatter and all_gather and its stream-ordered staging copies, failure messages.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "braid/core/tensor.h"

namespace braid::dist::nccl {

// A tensor a collective may use: defined, on cuda:`device` (the group's device) and dense. The
// messages name op, group and role, and send CPU tensors to the MPI backend.
void check_tensor(std::string_view group, std::string_view op, std::string_view what,
                  const Tensor& t, int device);
// input and output of reduce_scatter / all_gather: same dtype.
void check_same_dtype(std::string_view group, std::string_view op, const Tensor& input,
                      const Tensor& output);
// send/recv peer: a rank of the group other than this one (a lone ncclSend to oneself would
// block the group's stream for good, since its matching ncclRecv queues behind it).
void check_peer(std::string_view group, std::string_view op, int peer, int rank, int size);

// How reduce_scatter / all_gather lay a buffer of `total` elements out for NCCL, which needs
// equal chunks: chunk i of process_group.h (chunk_offset / chunk_size) goes to slot i of a
// staging buffer of parts * padded elements, padded = ceil(total / parts). The first `extra`
// chunks hold base + 1 = padded elements and fill their slots; the others hold base and leave one
// padding element at the end of their slot.
struct ChunkPlan {
  int64_t total = 0;
  int parts = 1;
  int64_t base = 0;    // total / parts
  int64_t extra = 0;   // total % parts: chunks with one element more
  int64_t padded = 0;  // slot size: base + (extra > 0)

  // NCCL can use the caller's buffers directly: every chunk has the same size.
  bool even() const { return extra == 0; }
  int64_t staged_numel() const { return padded * parts; }
};
ChunkPlan plan_chunks(int64_t total, int parts);

// Stream-ordered copies between the caller's layout (chunks back to back, as chunk_offset says)
// and the padded slots of `plan` (two copies at most: the full chunks are contiguous in both
// layouts, the short ones are one 2-D copy). pack also zeroes the padding, so NCCL never reduces
// uninitialised memory.
void pack_chunks(const void* src, void* dst, const ChunkPlan& plan, size_t element_size,
                 cudaStream_t stream);
void unpack_chunks(const void* src, void* dst, const ChunkPlan& plan, size_t element_size,
                   cudaStream_t stream);

// What a failure report says about the operation that failed.
struct FailedOp {
  std::string group;
  int size = 1;
  int rank = 0;
  int device = 0;
  std::string op;      // "all_reduce", "send", ...
  int64_t seq = 0;     // 0 for send/recv
  int peer = -1;       // send/recv: the group rank on the other side
  std::string detail;  // "f32[16] sum"
  double timeout_s = 0;
  double elapsed_s = 0;  // since the operation started on the group's stream; < 0: not started
  std::string backend = "nccl";  // the transport, in the message
};

// The report for an error the transport (ncclCommGetAsyncError) or CUDA raised while `op` was the
// oldest unfinished operation.
std::string async_error_message(const FailedOp& op, std::string_view error);

}  // namespace braid::dist::nccl
