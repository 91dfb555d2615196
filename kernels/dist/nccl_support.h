// Host-side pieces of the NCCL backend that tests can check without a device: dtype and reduce-op
// mapping, NCCL status text, argument checks, the padded-chunk plan of uneven reduce_scatter and
// all_gather, waiting out non-blocking NCCL calls, and the failure messages.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "braid/core/error.h"
#include "braid/core/tensor.h"
#include "braid/dist/process_group.h"

// ncclConfig_t and non-blocking communicators (what bounds communicator set-up by a timeout)
// arrived in NCCL 2.14; CMake leaves the backend out for older libraries, this catches the rest.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "braid's NCCL backend needs NCCL >= 2.14 (ncclCommInitRankConfig with blocking = 0)"
#endif

// ncclCommSplit arrived in NCCL 2.18; with older libraries a split re-bootstraps over MPI.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
#define BRAID_NCCL_HAS_COMM_SPLIT 1
#else
#define BRAID_NCCL_HAS_COMM_SPLIT 0
#endif

namespace braid::dist::nccl {

// Every braid dtype has an NCCL twin, so the mapping is total.
ncclDataType_t nccl_dtype(DType dtype);
// avg is ncclAvg: floating types pre-multiply each input by 1/size and sum; integer types sum
// (wrapping like the MPI backend) and divide with truncation toward zero.
ncclRedOp_t nccl_reduce_op(ReduceOp op);

// "ncclInvalidArgument": the enumerator's name, which is what one searches NCCL's docs for.
std::string_view result_name(ncclResult_t result);
// "ncclInvalidArgument (invalid argument (run with NCCL_DEBUG=WARN for details))".
std::string describe_status(ncclResult_t result);

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

// Waits out ncclInProgress, which a non-blocking communicator returns from any call until the
// call has taken effect (for a collective: until it is enqueued on its stream), by polling
// ncclCommGetAsyncError. Throws braid::Error naming `call` when the result is an error (with
// NCCL's last error text) or when `deadline` passes first.
void finish_call(ncclComm_t comm, ncclResult_t result, std::string_view call,
                 std::chrono::steady_clock::time_point deadline);

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
};

// The timeout report. NCCL cannot say which ranks never joined, so it says so and points at the
// collective log and at the MPI backend, whose timeout names the missing ranks.
std::string timeout_message(const FailedOp& op);
// The report for an error NCCL (ncclCommGetAsyncError) or CUDA raised while `op` was the oldest
// unfinished operation.
std::string async_error_message(const FailedOp& op, std::string_view error);

}  // namespace braid::dist::nccl

// Checks an NCCL call of a blocking kind (ncclGetUniqueId, ncclCommCount, ...) like every other
// status code: braid::Error with the expression and NCCL's text.
#define BRAID_NCCL_CHECK(expr) \
  BRAID_CHECK_STATUS(expr, ncclSuccess, ::braid::dist::nccl::describe_status)
